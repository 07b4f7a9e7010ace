"""What a call must pass before it is forwarded, and what its answer counts toward.

Before: the cost caps (the model policy's dollars per attempt among them), the model policy's
turns, a tripped loop breaker, and, once the body is read, the policy's model and output limit
and the same-step breaker. After a 2xx answer: the loop breakers' counts. Each refusal is a
:class:`Refused` the app answers in the API's own error shape; none reaches the provider.
"""

from __future__ import annotations

from agentc.core.errors import AgentcError
from agentc.gateway.breakers import Breakers, fingerprint
from agentc.gateway.ledger import Caps, Ledger
from agentc.gateway.meter import Api, Meter
from agentc.gateway.policy import Refusal, check_body, read_members
from agentc.gateway.prices import Tokens
from agentc.gateway.records import Call, usd_text
from agentc.gateway.sentinels import SentinelRegistry

BILLING = ("billing_error", "billing_error")
INVALID = ("invalid_request_error", "invalid_request_error")


class Refused(AgentcError):
    """A call answered by the gateway itself (logged, never forwarded).

    ``kinds``: the error type in the Anthropic and in the OpenAI shape.
    """

    def __init__(
        self,
        status: int,
        outcome: str,
        kinds: tuple[str, str],
        message: str,
        *,
        reason: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status, self.outcome, self.kinds, self.message = status, outcome, kinds, message
        self.reason = reason
        self.headers = headers


class Admission:
    def __init__(
        self, registry: SentinelRegistry, ledger: Ledger, caps: Caps, breakers: Breakers
    ) -> None:
        self.registry, self.ledger, self.caps, self.breakers = registry, ledger, caps, breakers

    def before(self, call: Call) -> None:
        """The checks that need no body: caps, turns, a tripped breaker."""
        self._caps(call)
        self._turns(call)
        self._tripped(call)

    def _caps(self, call: Call) -> None:
        assert call.grant is not None
        over = self.ledger.over_cap(call.grant, self.caps)
        if over is None:
            return
        name, spent, limit = over
        call.cap = name
        call.reason = f"{name} cap reached: {usd_text(spent)} of {usd_text(limit)}"
        self.registry.note_cap(call.grant.launch_id, name, call.reason)
        # 402 billing_error: the provider's own "no spending allowed" answer; harnesses do not
        # retry it (a 400 makes Claude Code try again several times, a 403 reads as an
        # authentication failure) and end the turn with this message.
        raise Refused(402, "refused_cap", BILLING, f"agentc: the {name} cost cap is reached "
                      f"({call.reason})")  # fmt: skip

    def _turns(self, call: Call) -> None:
        """The model policy's turns per attempt: once used, nothing more is forwarded (402, as a
        cap: the harness ends its turn rather than retrying)."""
        assert call.grant is not None
        grant = call.grant
        most = grant.policy.max_turns
        if most is None or self.ledger.turns(grant.attempt) < most:
            return
        call.policy = "max_turns"
        call.reason = f"the attempt has made its {most} model turns (max_turns)"
        self.registry.note_stop(grant.launch_id, "policy", "max_turns", call.reason)
        message = f"agentc: the model policy allows no more calls: {call.reason}"
        raise Refused(402, "refused_policy", BILLING, message)

    def _tripped(self, call: Call) -> None:
        assert call.grant is not None
        tripped = self.breakers.tripped(call.grant.attempt)
        if tripped is not None:
            self._break(call, tripped)

    def _break(self, call: Call, tripped: tuple[str, str]) -> None:
        assert call.grant is not None
        call.breaker, why = tripped
        call.reason = f"loop breaker {call.breaker}: {why}"
        self.registry.note_stop(call.grant.launch_id, "breaker", call.breaker, call.reason)
        message = f"agentc: a loop breaker ended this attempt's model calls ({call.reason})"
        raise Refused(402, "refused_breaker", BILLING, message)

    def request(self, call: Call, api: Api, body: bytes) -> bytes:
        """A metered call's body: the model policy's model and output limit (400
        invalid_request_error, the providers' answer to a bad model or max_tokens), and the
        same-step breaker. Returns the body to send (the policy's limit added if need be)."""
        assert call.grant is not None
        policy = call.grant.policy
        if not (policy.reads_body or self.breakers.limits.reads_body):
            return body
        members = read_members(body)
        if policy.reads_body:
            checked = check_body(policy, api, body, members)
            if isinstance(checked, Refusal):
                call.policy = checked.rule
                reason = checked.message
                raise Refused(400, "refused_policy", INVALID, f"agentc: {reason}", reason=reason)
            body = checked.body
        if isinstance(members, dict):
            call.tools = bool(members.get("tools"))
            call.step = fingerprint(api, members)
        tripped = self.breakers.admit(call.grant.attempt, call.step)
        if tripped is not None:
            self._break(call, tripped)
        return body

    def answered(self, call: Call, meter: Meter, tokens: Tokens | None) -> None:
        """Count a 2xx answer toward the breakers; one it trips ends the attempt's calls."""
        assert call.grant is not None
        grant = call.grant
        used = meter.used_tools
        tripped = self.breakers.answered(grant.attempt, call.step, call.tools, used, tokens)
        if tripped is not None:
            name, why = tripped
            reason = f"loop breaker {name}: {why}"
            self.registry.note_stop(grant.launch_id, "breaker", name, reason)
