"""A tiny user API: the handler behind GET /users/<id>. No server: bench.py calls it."""

USERS = [{"id": i, "name": f"user{i}", "plan": "pro" if i % 7 == 0 else "free"} for i in range(20000)]


def get_user(user_id: int) -> dict | None:
    """The user with this id, or None (a 404)."""
    for user in USERS:
        if user["id"] == user_id:
            return user
    return None
