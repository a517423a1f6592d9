"""Classic pcap files record by record, for the scripts: bench's mixes, fuzz's corpora and
mutated inputs, icrc-scapy's frames. Either byte order, micro- or nanosecond times; pcapng is
not read (ValueError).

    python3 scripts/pcap_records.py count FILE    prints how many records FILE holds
    python3 scripts/pcap_records.py loop FILE OUT MPPS LOOPS
        writes FILE's records LOOPS times over into OUT, timed as a live capture looping
        FILE at MPPS million frames a second receives them (frame k at k / rate, nanosecond
        times): what `roceprobe live` sees from a net_pcap vdev with infinite_rx=1 at that
        rate, for `roceprobe replay` (docs/PERFORMANCE.md, "The report path at fabric scale")
"""
import struct
import sys

MICROS = 0xA1B2C3D4
NANOS = 0xA1B23C4D


class Capture:
    """A file's 24-byte header as written, and its records, each a list
    [seconds, fraction, original length, frame bytes] (a list, so that it can be changed)."""

    def __init__(self, header, endian, records):
        self.header, self.endian, self.records = header, endian, records
        magic, = struct.unpack(endian + "I", header[:4])
        self.nanos = magic == NANOS
        self.linktype = struct.unpack(endian + "I", header[20:24])[0] & 0x0FFFFFFF

    def time_ns(self, record):
        return record[0] * 10**9 + (record[1] if self.nanos else record[1] * 1000)


def read(path):
    data = open(path, "rb").read()
    if len(data) < 24:
        raise ValueError("not a pcap file (too short)")
    for endian in "<>":
        if struct.unpack(endian + "I", data[:4])[0] in (MICROS, NANOS):
            break
    else:
        raise ValueError("not a classic pcap file (pcapng is not read)")
    rec = struct.Struct(endian + "IIII")
    records, off = [], 24
    while off + 16 <= len(data):
        s, frac, cap, orig = rec.unpack_from(data, off)
        records.append([s, frac, orig, data[off + 16:off + 16 + cap]])
        off += 16 + cap
    return Capture(data[:24], endian, records)


def nanosecond_header(snaplen=262144):
    """The header of a little-endian Ethernet capture with nanosecond times."""
    return struct.pack("<IHHiIII", NANOS, 2, 4, 0, 0, snaplen, 1)


def write(path, header, records):
    """`header` (from a Capture, or `nanosecond_header`), then the records, each captured
    as long as its bytes, in the header's byte order."""
    endian = "<" if struct.unpack("<I", header[:4])[0] in (MICROS, NANOS) else ">"
    rec = struct.Struct(endian + "IIII")
    with open(path, "wb") as f:
        f.write(header)
        for s, frac, orig, data in records:
            f.write(rec.pack(s, frac, len(data), orig))
            f.write(data)


def loop(path, out, mpps, loops):
    """See the module's text: FILE looped LOOPS times at MPPS, into OUT."""
    records = read(path).records
    start = 1_800_000_000 * 10**9
    timed = []
    for k in range(len(records) * loops):
        orig, data = records[k % len(records)][2:]
        t = start + int(k * 1000 / mpps)
        timed.append([t // 10**9, t % 10**9, orig, data])
    write(out, nanosecond_header(), timed)


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "count":
        print(len(read(sys.argv[2]).records))
    elif len(sys.argv) == 6 and sys.argv[1] == "loop":
        loop(sys.argv[2], sys.argv[3], float(sys.argv[4]), int(sys.argv[5]))
    else:
        sys.exit("usage: pcap_records.py count FILE | loop FILE OUT MPPS LOOPS")
