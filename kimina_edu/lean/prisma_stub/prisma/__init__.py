"""A stand-in for the *generated* Prisma client that kimina-lean-server imports at start-up.

Why: ``server/prisma_client.py`` does ``from prisma import Prisma``; the real package only works
after ``prisma generate``, which downloads engines from the network (kimina-ast-server 2.1.3
even runs it at import time). The server touches the database only when
``LEAN_SERVER_DATABASE_URL`` is set, and :class:`kimina_edu.lean.real_server.RealLeanServer`
never sets it, so a ``Prisma`` whose ``connect`` refuses is all the server needs. This folder is
put first on ``PYTHONPATH`` of the server process only; nothing else imports it.
"""


class Prisma:
    """Refuses to connect: no database is configured for the contract tests."""

    def __init__(self, *args, **kwargs):
        self.args, self.kwargs = args, kwargs

    def is_connected(self) -> bool:
        return False

    async def connect(self, *args, **kwargs):
        raise RuntimeError("kimina-edu Prisma stub: no database in the contract tests (unset LEAN_SERVER_DATABASE_URL)")

    async def disconnect(self, *args, **kwargs):
        return None

    def __getattr__(self, name):
        raise RuntimeError(f"kimina-edu Prisma stub: no database (asked for {name!r})")
