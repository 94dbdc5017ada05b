"""``ggstack test``: each patch's own tests on the base without it, with it, and on its old base.

``stage`` is the stage; ``plan`` says which tests run on which trees, ``runner`` runs them (each
in a checkout of its own, ``worktrees``, ``command``, ``processes``) or reads them from the
cache, ``results`` says what one run means, ``evidence`` what a patch's runs mean, and
``verdict`` folds that onto the Run. ``shards`` spreads the same jobs over CI machines.
"""
