# Flattens one JSON document into "path<TAB>value" lines, for scripts that must run where only
# bash, coreutils and awk are certain (the GPU machine). POSIX awk: works with mawk and gawk.
#
#   {"a": 1, "b": {"c d": [true, "x"]}}   ->   a<TAB>1
#                                              b/c d/0<TAB>true
#                                              b/c d/1<TAB>x
# Object keys and array indices are joined with "/"; strings lose their quotes (escapes are
# decoded except \uXXXX, kept as written; tabs and newlines inside strings become spaces). Empty
# objects and arrays print "path<TAB>{}" / "path<TAB>[]". On malformed input it prints
# "json_flatten: error at offset N" on stderr and exits 1.
#
# Usage: awk -f json_flatten.awk file.json

{ doc = doc $0 "\n" }

END {
  n = length(doc)
  pos = 1
  ws()
  if (pos > n) fail("empty document")
  value("")
  ws()
  if (pos <= n) fail("trailing data")
  exit 0
}

function fail(msg) {
  printf "json_flatten: %s at offset %d\n", msg, pos > "/dev/stderr"
  exit 1
}

function ws(   c) {
  while (pos <= n) {
    c = substr(doc, pos, 1)
    if (c != " " && c != "\t" && c != "\n" && c != "\r") return
    pos++
  }
}

function join(path, key) { return path == "" ? key : path "/" key }

function emit(path, v) { print path "\t" v }

# After an object member or array element: 0 at ",", 1 at `closer`; anything else fails.
function after_member(closer,   c) {
  ws()
  c = substr(doc, pos, 1)
  pos++
  if (c == ",") return 0
  if (c == closer) return 1
  fail("expected ',' or '" closer "'")
}

function value(path,   c, key, idx) {
  ws()
  c = substr(doc, pos, 1)
  if (c == "{") {
    pos++
    ws()
    if (substr(doc, pos, 1) == "}") { pos++; emit(path, "{}"); return }
    for (;;) {
      ws()
      if (substr(doc, pos, 1) != "\"") fail("expected a key")
      key = str()
      ws()
      if (substr(doc, pos, 1) != ":") fail("expected ':'")
      pos++
      value(join(path, key))
      if (after_member("}")) return
    }
  }
  if (c == "[") {
    pos++
    ws()
    if (substr(doc, pos, 1) == "]") { pos++; emit(path, "[]"); return }
    for (idx = 0; ; idx++) {
      value(join(path, idx))
      if (after_member("]")) return
    }
  }
  if (c == "\"") { emit(path, str()); return }
  if (c == "") fail("unexpected end")
  emit(path, literal())
}

# A literal: number, true, false, null.
function literal(   start, c) {
  start = pos
  while (pos <= n) {
    c = substr(doc, pos, 1)
    if (c == "," || c == "}" || c == "]" || c == " " || c == "\t" || c == "\n" || c == "\r") break
    pos++
  }
  if (pos == start) fail("unexpected character")
  return substr(doc, start, pos - start)
}

# A string at pos (the opening quote); returns its decoded text and moves past the closing quote.
function str(   out, c, e) {
  pos++
  out = ""
  while (pos <= n) {
    c = substr(doc, pos, 1)
    if (c == "\"") { pos++; return out }
    if (c == "\\") {
      e = substr(doc, pos + 1, 1)
      pos += 2
      if (e == "n" || e == "t" || e == "r" || e == "b" || e == "f") out = out " "
      else if (e == "u") { out = out "\\u" substr(doc, pos, 4); pos += 4 }
      else out = out e
      continue
    }
    if (c == "\t" || c == "\n") c = " "
    out = out c
    pos++
  }
  fail("unterminated string")
}
