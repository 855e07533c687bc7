"""Conformance: API keys (create, authenticate, list, revoke)."""

from __future__ import annotations

import pytest

from memstrata import Memory
from memstrata.errors import InvalidInput, NotFound
from memstrata.testing.conformance.helpers import (
    _ids_of,
    fresh_scope,
    scope_state,
    sql_rows,
)


class KeysConformance:
    def test_create_authenticate_list_revoke(self, memory: Memory) -> None:
        scope = fresh_scope()
        user_key, user_secret = memory.keys.create(scope.tenant, user=scope.user, label="ci")
        admin_key, admin_secret = memory.keys.create(scope.tenant, admin=True)
        other_key, _ = memory.keys.create(fresh_scope().tenant, admin=True)
        assert user_secret != admin_secret
        p = memory.keys.authenticate(user_secret)
        assert p is not None
        assert (p.key_id, p.tenant, p.user, p.admin) == (
            user_key.id,
            scope.tenant,
            scope.user,
            False,
        )
        p = memory.keys.authenticate(admin_secret)
        assert p is not None
        assert (p.key_id, p.tenant, p.user, p.admin) == (admin_key.id, scope.tenant, None, True)
        listed = memory.keys.list(scope.tenant)
        assert sorted(_ids_of(listed)) == sorted([user_key.id, admin_key.id])
        assert other_key.id not in _ids_of(listed)
        assert {k.label for k in listed} == {"ci", None}
        assert all(k.revoked_at is None for k in listed)
        assert scope.user in [u for u, _ in memory.users.list(scope.tenant).items]
        memory.keys.revoke(user_key.id)
        assert memory.keys.authenticate(user_secret) is None
        assert memory.keys.authenticate(admin_secret) is not None
        revoked = {k.id: k for k in memory.keys.list(scope.tenant)}[user_key.id]
        assert revoked.revoked_at is not None
        with pytest.raises(NotFound):
            memory.keys.revoke("no-such-key")

    def test_unknown_secrets(self, memory: Memory) -> None:
        _, secret = memory.keys.create(fresh_scope().tenant, admin=True)
        for wrong in ("", "msk_nope", secret + "x", secret[:-1], secret.upper()):
            assert memory.keys.authenticate(wrong) is None

    def test_secrets_not_stored(self, memory: Memory) -> None:
        scope = fresh_scope()
        secrets = [
            memory.keys.create(scope.tenant, user=scope.user)[1],
            memory.keys.create(scope.tenant, admin=True)[1],
        ]
        rows = sql_rows(memory, "SELECT * FROM api_keys WHERE tenant_id = ?", (scope.tenant,))
        assert len(rows) == 2
        stored = repr(rows)
        for secret in secrets:
            assert secret not in stored
            assert secret.rsplit("_", 1)[-1] not in stored  # nor its random part

    def test_invalid_key_requests(self, memory: Memory) -> None:
        tenant = fresh_scope().tenant
        before = scope_state(memory, tenant)
        with pytest.raises(InvalidInput):
            memory.keys.create(tenant)
        with pytest.raises(InvalidInput):
            memory.keys.create(tenant, user="u", admin=True)
        with pytest.raises(InvalidInput):
            memory.keys.create("bad tenant", admin=True)
        with pytest.raises(InvalidInput):
            memory.keys.create(tenant, user="bad/user")
        assert scope_state(memory, tenant) == before
