"""The evaluator contract: run every review through the prompt and the model, and print
{"pass": accuracy >= 0.9, "score": accuracy, "notes": ...} as JSON."""

import json
from pathlib import Path

import model


def main() -> None:
    template = Path("prompt.txt").read_text()
    rows = [json.loads(line) for line in Path("reviews.jsonl").read_text().splitlines()]
    right = 0
    for row in rows:
        answer = model.complete(template.replace("{review}", row["review"])).strip().lower()
        right += answer == row["label"]  # only the bare label counts: the format is the task
    accuracy = right / len(rows)
    notes = f"{right}/{len(rows)} answers were exactly the label"
    print(json.dumps({"pass": accuracy >= 0.9, "score": round(accuracy, 4), "notes": notes}))


if __name__ == "__main__":
    main()
