import pytest

from inventory.store import Store


def test_add_accumulates_quantity():
    store = Store()
    store.add("apple", 3, 50)
    store.add("apple", 2, 50)
    assert store.items["apple"] == 5


def test_add_rejects_non_positive_quantity():
    with pytest.raises(ValueError):
        Store().add("apple", 0)


def test_remove_more_than_stock_fails():
    store = Store()
    store.add("pear", 1, 30)
    with pytest.raises(ValueError):
        store.remove("pear", 2)


def test_remove_unknown_item_fails():
    with pytest.raises(ValueError):
        Store().remove("plum", 1)


def test_value_sums_quantity_times_price():
    store = Store()
    store.add("apple", 2, 50)
    store.add("pear", 1, 30)
    assert store.value() == 130
