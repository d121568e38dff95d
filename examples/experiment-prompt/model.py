"""A stand-in for a language model, deterministic and offline: it follows the prompt's
answer format when the prompt gives one, and otherwise rambles as models do."""

POSITIVE = {"great", "love", "excellent", "works", "recommend", "fast"}
NEGATIVE = {"broke", "refund", "slow", "terrible", "waste", "never"}


def complete(prompt: str) -> str:
    words = {w.strip(".,!?").lower() for w in prompt.split()}
    score = len(words & POSITIVE) - len(words & NEGATIVE)
    label = "positive" if score > 0 else "negative"
    if "one word" in prompt.lower():
        return label
    # Without an answer format the reply hedges, and only sometimes names the label.
    return f"Interesting review! It seems {label} in parts, but it is hard to say."
