"""``python -m ggstack`` and the ``ggstack`` command."""

from ggstack.gcpause import paused


def run() -> None:
    with paused(keep=True):  # start-up builds thousands of objects, none of them garbage
        from ggstack.cli import main
    main()


if __name__ == "__main__":
    run()
