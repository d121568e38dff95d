from typing import List


def format_money(cents):
    return f"${cents / 100:.2f}"


def total(values: List[int]) -> int:
    result=0
    for v in values :
        result = result+v
    return result


def is_positive(n):
    if n > 0:
        return True
    else:
        return False
