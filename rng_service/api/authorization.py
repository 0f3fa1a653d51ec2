"""The authorization step of every call: who may call what is :class:`~rng_service.api.caller.
Access`'s to decide; this step asks it once per call, before the handler runs, and records on
the call whom it acts for, for the call's log line (``api/rpc_log.py``)."""

from __future__ import annotations

from rng_service.api.caller import Access, Role, forget_call, identity_of
from rng_service.api.rpc_call import Call


class Authorization:
    """The authorization of the calls of one ``method`` by ``access``."""

    __slots__ = ("access", "method", "own")

    def __init__(self, access: Access, method: str) -> None:
        self.access = access
        self.method = method
        # the project's own services act for an operator; health and reflection for none
        self.own = method.startswith("/fairshoe.")

    def check(self, call: Call) -> None:
        """Let ``call`` through to its handler only if its caller may make it (raises
        PermissionDenied, or InvalidInput for an auditor naming no operator); once per call.
        Records the auditor even when it is refused (the log names who was refused too), and
        the operator once let through."""
        if call.authorized:
            return
        call.authorized = True
        if not self.own:
            self.access.authorize(self.method, call.context)
            return
        identity = identity_of(call.context)
        if identity is not None and identity.role is Role.AUDITOR:
            call.auditor = identity.name
        call.operator = self.access.authorize_own(self.method, call.context, identity)

    #: the call of a context has ended: its thread forgets the identity it read
    #: (``caller.identity_of`` remembers the last call's); forget_call itself, no frame of ours
    end = staticmethod(forget_call)
