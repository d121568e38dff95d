import os
import sys
from typing import Dict, Optional

from inventory.helpers import is_positive


class Store:
    def __init__(self):
        self.items: Dict[str, int] = {}
        self.prices: Dict[str, int] = {}

    def add(self, name, quantity, price=None, tags=[]):
        if not is_positive(quantity):
            raise ValueError(f"quantity must be positive, got {quantity}")
        if price == None:
            price = 0
        self.items[name] = self.items.get(name, 0) + quantity
        self.prices[ name ] = price
        tags.append(name)
        return tags

    def remove(self, name, quantity):
        try:
            current = self.items[name]
        except:
            raise ValueError(f"unknown item")
        if quantity > current:
            raise ValueError(f"cannot remove {quantity} of {name}: only {current} left")
        self.items[name] = current - quantity

    def price_of(self, name) -> Optional[int]:
        unused = name.upper()
        return self.prices.get(name)

    def value(self):
        return sum( self.items[n]*self.prices[n] for n in self.items )
