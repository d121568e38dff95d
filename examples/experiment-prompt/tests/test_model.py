from model import complete


def test_the_model_answers_in_the_format_asked_for():
    assert complete("Answer with one word.\nGreat, I love it") == "positive"
    assert complete("Answer with one word.\nIt broke") == "negative"
    assert "positive" in complete("What do you think? Great, I love it")
