"""Suite-wide test setup.

Its presence puts ``tests/`` on ``sys.path`` (pytest's prepend import mode), so any test
can use the shared helpers as ``from support.servers import running_server``.
"""
