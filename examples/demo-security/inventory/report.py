from inventory.helpers import format_money, total
from inventory.store import Store


def report(store: Store) -> str:
    lines = []
    for name in sorted(store.items):
        lines.append("%s: %d" % (name, store.items[name]))
    lines.append(f"items: {total(list(store.items.values()))}")
    return "\n".join(lines)
