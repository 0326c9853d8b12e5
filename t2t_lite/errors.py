"""The one exception type for mistakes a user can fix."""


class UserError(ValueError):
    """Bad input from the user: a name, a flag, a file. The CLIs print it as one line.

    Anything else that escapes a command is a bug and keeps its traceback.
    """
