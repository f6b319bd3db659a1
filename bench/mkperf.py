"""Builds large perf.data files from the real recorded ones, for bench/import.sh.

spe FILE.wrapped.perf.data OUT MB: the AUX bytes of the wrapped SPE recording
repeated (whole records) into 1 MiB AUXTRACE chunks until the file is MB MiB.
pebs perf.data OUT COPIES: the file's sample records appended COPIES more times
(the feature sections after the data are moved along).
"""
import struct
import sys

PERF_RECORD_SAMPLE, AUXTRACE_INFO, AUXTRACE = 9, 70, 71


def header(b):
    data_at, data_size = struct.unpack_from("<QQ", b, 40)
    return data_at, data_size


def records(b, at, end):
    while at < end:
        kind, misc, size = struct.unpack_from("<IHH", b, at)
        extra = struct.unpack_from("<Q", b, at + 8)[0] if kind == AUXTRACE else 0
        yield kind, b[at:at + size + extra]
        at += size + extra


def spe(src, dst, megabytes):
    b = open(src, "rb").read()
    data_at, data_size = header(b)
    recs = list(records(b, data_at, data_at + data_size))
    info = next(r for k, r in recs if k == AUXTRACE_INFO)
    aux = next(r for k, r in recs if k == AUXTRACE)
    stream = aux[48:48 + struct.unpack_from("<Q", aux, 8)[0]]
    chunk = stream * ((1 << 20) // len(stream))
    body = bytearray(info)
    offset = 0
    while len(body) < megabytes << 20:
        body += struct.pack("<IHHQQQIIII", AUXTRACE, 0, 48, len(chunk), offset, 0, 0, 0xFFFFFFFF, 0, 0)
        body += chunk
        offset += len(chunk)
    out = bytearray(b[:data_at]) + body
    struct.pack_into("<Q", out, 48, len(body))
    open(dst, "wb").write(out)


def pebs(src, dst, copies):
    b = open(src, "rb").read()
    data_at, data_size = header(b)
    data_end = data_at + data_size
    samples = [r for k, r in records(b, data_at, data_end) if k == PERF_RECORD_SAMPLE]
    # Each copy runs later than the last, as a longer recording would (perf's
    # event ordering slows to a crawl on repeated timestamps). The fixture's
    # sample_type is IP|TID|TIME|...: the time is the record's fourth word.
    times = [struct.unpack_from("<Q", r, 24)[0] for r in samples]
    span = max(times) - min(times) + 1
    extra = bytearray()
    for i in range(1, copies + 1):
        for r in samples:
            r = bytearray(r)
            struct.pack_into("<Q", r, 24, struct.unpack_from("<Q", r, 24)[0] + i * span)
            extra += r
    out = bytearray(b[:data_end]) + extra + b[data_end:]
    struct.pack_into("<Q", out, 48, data_size + len(extra))
    features = sum(bin(w).count("1") for w in struct.unpack_from("<4Q", b, 72))
    table = data_end + len(extra)
    for i in range(features):
        at, size = struct.unpack_from("<QQ", out, table + 16 * i)
        struct.pack_into("<Q", out, table + 16 * i, at + len(extra))
    open(dst, "wb").write(out)


if __name__ == "__main__":
    kind, src, dst, n = sys.argv[1:5]
    {"spe": spe, "pebs": pebs}[kind](src, dst, int(n))
