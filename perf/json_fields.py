"""Prints the named fields of the JSON object on the last line of stdin, space-separated; a list
prints as a/b, and `list[].key` prints that key of every element of a list of objects as a/b.
Used by rounds.sh and ab.sh to read nervix-bench's --json line."""
import json
import sys

record = json.loads(sys.stdin.read().strip().splitlines()[-1])


def show(value):
    return "/".join(str(x) for x in value) if isinstance(value, list) else str(value)


def lookup(field):
    if "[]." in field:
        name, key = field.split("[].", 1)
        return [element.get(key) for element in record.get(name) or []]
    return record.get(field)


print(" ".join(show(lookup(field)) for field in sys.argv[1:]))
