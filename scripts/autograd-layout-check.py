#!/usr/bin/env python3
"""Checks the autograd layout table of parcagpu-trace (tools/trace/autograd.cc, kLayouts) against a real
PyTorch, without a GPU: run under the torch to check, e.g.

    /opt/torch/.venv/bin/python scripts/autograd-layout-check.py

It prints torch's version and major.minor, whether libtorch_cpu.so exports the two symbols the
trace attaches to (read from its ELF .dynsym, as `nm -D` would), the offset of Node::sequence_nr_
found in a live Node (y = a @ b with requires_grad: y.grad_fn is a THPCppFunction whose
std::shared_ptr<Node> cdata follows PyObject_HEAD, so the Node* is the word at id(grad_fn) + 16;
its first 128 bytes are scanned for y.grad_fn._sequence_nr()), and the vtable pointer's symbol
(dladdr). Exit status 0 when everything matches the table's row for this version, 1 otherwise.
"""
import ctypes
import ctypes.util
import os
import re
import struct
import sys

# The table's row (tools/trace/autograd.cc): keep in step with it.
SEQ_SYMBOL = "_ZN2at15sequence_number17get_and_incrementEv"
EVAL_SYMBOL = ("_ZN5torch8autograd6Engine17evaluate_functionERSt10shared_ptrINS0_9GraphTaskEEPNS0_4NodeERNS0_"
               "11InputBufferERKS2_INS0_10ReadyQueueEE")
SEQ_OFFSET = 24
KNOWN = {(2, 11)}


def dynsym_names(path):
    """The defined symbols of an ELF64 little-endian file's .dynsym."""
    with open(path, "rb") as f:
        data = f.read()
    assert data[:4] == b"\x7fELF" and data[4] == 2, "not ELF64"
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", data, 0x3A)
    secs = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize) for i in range(shnum)]
    names = set()
    for s in secs:
        if s[1] != 11:  # SHT_DYNSYM
            continue
        off, size, link, entsize = s[4], s[5], s[6], s[9]
        stroff = secs[link][4]
        for i in range(size // entsize):
            st_name, st_info, st_other, st_shndx, st_value, st_size = struct.unpack_from(
                "<IBBHQQ", data, off + i * entsize)
            if st_shndx == 0:
                continue
            end = data.index(b"\0", stroff + st_name)
            names.add(data[stroff + st_name:end].decode())
    return names


class DlInfo(ctypes.Structure):
    _fields_ = [("dli_fname", ctypes.c_char_p), ("dli_fbase", ctypes.c_void_p),
                ("dli_sname", ctypes.c_char_p), ("dli_saddr", ctypes.c_void_p)]


def main():
    import torch
    ok = True
    print("torch", torch.__version__, "from", os.path.dirname(torch.__file__))
    m = re.match(r"(\d+)\.(\d+)", torch.__version__)
    mm = (int(m.group(1)), int(m.group(2)))
    print("major.minor %d.%d: %s in the table" % (mm + ("" if mm in KNOWN else "NOT",)))
    ok &= mm in KNOWN
    lib = os.path.join(os.path.dirname(torch.__file__), "lib", "libtorch_cpu.so")
    names = dynsym_names(lib)
    for sym in (SEQ_SYMBOL, EVAL_SYMBOL):
        there = sym in names
        print("%s exports %s: %s" % (os.path.basename(lib), sym, "yes" if there else "NO"))
        ok &= there
    if EVAL_SYMBOL not in names:
        near = sorted(n for n in names if "evaluate_function" in n)
        print("  evaluate_function symbols there:", near)

    a = torch.randn(4, 4, requires_grad=True)
    b = torch.randn(4, 4, requires_grad=True)
    for _ in range(5):  # numbers past 0, 1: a Node full of small words would match those
        a @ b
    y = a @ b
    fn = y.grad_fn
    seq = fn._sequence_nr()
    node = ctypes.c_uint64.from_address(id(fn) + 16).value
    words = [ctypes.c_uint64.from_address(node + 8 * i).value for i in range(16)]
    found = [8 * i for i, w in enumerate(words) if w == seq]
    print("grad_fn %s, _sequence_nr() %d, Node* 0x%x; the value at offsets %s (table: %d)" % (
        type(fn).__name__, seq, node, found, SEQ_OFFSET))
    ok &= SEQ_OFFSET in found
    # A second node, to tell the counter from a coincidence.
    z = (y * 2).sum()
    fn2 = z.grad_fn.next_functions[0][0]
    node2 = ctypes.c_uint64.from_address(id(fn2) + 16).value
    seq2 = ctypes.c_uint64.from_address(node2 + SEQ_OFFSET).value
    print("second node %s: _sequence_nr() %d, word at %d: %d" % (type(fn2).__name__, fn2._sequence_nr(),
                                                                 SEQ_OFFSET, seq2))
    ok &= seq2 == fn2._sequence_nr()
    libdl = ctypes.CDLL(ctypes.util.find_library("dl") or "libc.so.6")
    info = DlInfo()
    if libdl.dladdr(ctypes.c_void_p(words[0]), ctypes.byref(info)):
        sname = info.dli_sname.decode() if info.dli_sname else None
        off = words[0] - (info.dli_saddr or 0)
        print("vtable pointer 0x%x: %s+%d in %s" % (words[0], sname, off, info.dli_fname.decode()))
        ok &= bool(sname and sname.startswith("_ZTV") and "MmBackward0" in sname)
    else:
        print("vtable pointer 0x%x: dladdr found nothing" % words[0])
        ok = False
    print("OK: the table's row holds" if ok else "MISMATCH: see above")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
