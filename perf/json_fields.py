"""Prints the named fields of the JSON object on the last line of stdin, space-separated; a list
prints as a/b. Used by rounds.sh and ab.sh to read nervix-bench's --json line."""
import json
import sys

record = json.loads(sys.stdin.read().strip().splitlines()[-1])


def show(value):
    return "/".join(str(x) for x in value) if isinstance(value, list) else str(value)


print(" ".join(show(record.get(field)) for field in sys.argv[1:]))
