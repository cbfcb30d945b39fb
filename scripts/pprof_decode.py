"""pprof profiles read back without Go's pprof: a gzipped perftools.profiles.Profile decoded by
protoc from tools/trace/proto/profile.proto (the schema parcagpu-trace writes) into nested dicts.
Used by scripts/pprof-top.py and by the integration tests that read --pprof's output."""
import codecs
import gzip
import os
import subprocess

PROTO_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tools", "trace",
                         "proto")


def decode(raw):
    """A gzipped perftools.profiles.Profile as nested dicts (`protoc --decode`, its text format):
    every field a list."""
    text = subprocess.run(["protoc", "--proto_path=" + PROTO_DIR, "--decode=perftools.profiles.Profile",
                           os.path.join(PROTO_DIR, "profile.proto")], input=gzip.decompress(raw),
                          capture_output=True, check=True).stdout.decode()
    root, stack = {}, []
    cur = root
    for line in text.splitlines():
        line = line.strip()
        if line.endswith("{"):
            child = {}
            cur.setdefault(line[:-1].strip(), []).append(child)
            stack.append(cur)
            cur = child
        elif line == "}":
            cur = stack.pop()
        elif line:
            key, value = line.split(": ", 1)
            cur.setdefault(key, []).append(codecs.escape_decode(value[1:-1])[0].decode() if value[0] == '"' else
                                           (value == "true") if value in ("true", "false") else int(value))
    return root


def one(msg, key):
    """A message's single field `key`; proto3: an absent field is 0."""
    return msg.get(key, [0])[0]
