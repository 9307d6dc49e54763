"""The one exception type the CLI turns into a readable one-line message."""


class UserError(ValueError):
    """Bad input or configuration that the user can fix; the message says how."""
