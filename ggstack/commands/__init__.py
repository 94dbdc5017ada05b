"""One module a command: its click function (``command``) and its terminal rendering; ``context`` is
what every command is given (the fork, the stored stacks, the one error handler), ``output`` where it prints."""
