"""``ggstack test``: each patch's own tests on the base without it, with it, and on its old base.

``stage`` runs the jobs here and ``shards`` on CI machines; both plan them (``plan``), run them
(``runner``) and fold what they say onto the Run (``verdict``).
"""
