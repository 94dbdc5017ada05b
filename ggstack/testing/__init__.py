"""``ggstack test``: each patch's own tests on the base without it, with it, and on its old base; ``stage`` runs the
jobs here, ``shards`` on CI machines; both plan (``plan``), run (``runner``) and fold onto the Run (``verdict``)."""
