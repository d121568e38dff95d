from inventory.report import format_money, report
from inventory.store import Store


def test_report_lists_items_sorted():
    store = Store()
    store.add("pear", 1, 30)
    store.add("apple", 2, 50)
    assert report(store).splitlines()[:2] == ["apple: 2", "pear: 1"]


def test_format_money_is_reexported_for_callers():
    assert format_money(1234) == "$12.34"
