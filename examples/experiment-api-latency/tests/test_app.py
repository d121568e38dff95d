from app import get_user


def test_a_known_user_and_a_missing_one():
    assert get_user(14) == {"id": 14, "name": "user14", "plan": "pro"}
    assert get_user(10**6) is None
