#!/usr/bin/env python3
"""Measure PyTorch and CuPy on curd-bench's scenarios, as CSV rows.

What users would otherwise pick, timed the way curd-bench times curd and the
raw driver (tools/curd-bench/README.md): every path is checked byte for byte
first, then warmed up, calibrated so that a sample lasts about 5 ms (one
operation per sample for 16 MiB and more), and sampled; each operation
includes the synchronisation that makes its work complete, so the host
clock reads finished work. The rows have curd-bench --csv's columns, so

    build/tools/curd-bench --csv=curd.csv
    python3 bench/peers/measure.py --csv=peers.csv
    make bench-plot BENCH_CSV="curd.csv peers.csv"

draws both in the same charts. Scenarios (curd-bench's names):

  transfer/small-roundtrip    4 KiB host to device and back
  transfer/upload-sweep       host to device, pageable and pinned memory,
  transfer/download-sweep     and back, at 4 KiB, 64 KiB, 1 MiB, 16 MiB,
                              256 MiB (series "torch pageable", ...)
  transfer/fused-reads        64 strided 4 KiB pieces of a device buffer,
                              gathered on the device and copied out at once
  transfer/fused-writes       the same pieces written from the host: one
                              copy up, placed on the device by a scatter
  dispatch/borrowed-small     4 KiB in, add one on the device, 4 KiB out
  transfer/scattered-reads[-irregular][-cold]
  transfer/scattered-writes[-irregular][-cold]
                              (torch) the 64 pieces of 4 KiB of curd-bench's
                              scattered scenarios, one in each 8 KiB of a
                              device buffer, at one stride (rows of 4 KiB)
                              or at random 64-byte points (rows of 64
                              bytes): index_select + one copy_ into host
                              memory, or one copy up + index_copy_; into
                              or from a warm 256 KiB, or (-cold) the first
                              256 KiB of a 256 MiB pageable tensor that a
                              pageable copy from the device fills again,
                              untimed, before every timed operation
  share/export-import-map     (torch) a 256 MiB CUDA tensor sent to another
                              process through a torch.multiprocessing queue
                              (reduce_tensor; rebuild_cuda_tensor there,
                              which opens the CUDA IPC handle; the tensor
                              dropped, which closes it; an answer back),
                              and an int sent the same way (the round trip
                              alone)

curd-bench reads the torch rows of the scattered and share scenarios as
its reference lines and targets when given this CSV in
CURD_BENCH_PEERS_CSV (tools/curd-bench/README.md).

Without a GPU, or without torch and cupy, it says so and exits 0 with no
rows: there is nothing to compare on such a machine, and that is not a
failure of the script.
"""

import argparse
import statistics
import sys
import time

SIZES = [4 << 10, 64 << 10, 1 << 20, 16 << 20, 256 << 20]
LARGE_BYTES = 16 << 20
SMALL_BYTES = 4 << 10
PIECES, PIECE_BYTES = 64, 4 << 10
STRIDE_BYTES = 8 << 10
REGION_BYTES = 256 << 20
COLD_SAMPLES, COLD_SAMPLES_QUICK = 21, 5
HEADER = ("scenario,variant,role,size_bytes,threads,median,p10,p90,unit,"
          "ratio_vs_raw")


def quantile(sorted_values, q):
    """Linear interpolation between the nearest ranks, as curd-bench."""
    rank = q * (len(sorted_values) - 1)
    below = int(rank)
    if below + 1 >= len(sorted_values):
        return sorted_values[-1]
    fraction = rank - below
    return (sorted_values[below]
            + fraction * (sorted_values[below + 1] - sorted_values[below]))


def measure_prepared(op, prepare, quick):
    """As measure, one operation per sample, each after prepare() (not
    timed): curd-bench's cold scenarios."""
    per_op = []
    for index in range((COLD_SAMPLES_QUICK if quick else COLD_SAMPLES) + 2):
        prepare()
        start = time.perf_counter_ns()
        op(1)
        elapsed = time.perf_counter_ns() - start
        if index >= 2:  # two warm-up calls
            per_op.append(elapsed)
    per_op.sort()
    return (statistics.median(per_op), quantile(per_op, 0.1),
            quantile(per_op, 0.9))


def measure(op, byte_len, quick):
    """ns per operation: (median, p10, p90) over the samples of op(n),
    which runs n operations back to back, each completed."""
    target_ns = 2e6 if quick else 5e6
    samples = (5 if quick else 21) if byte_len >= LARGE_BYTES else (
        11 if quick else 41)
    # Warm-up and calibration: double until one call lasts an eighth of a
    # sample, then size a sample from the fastest rate seen.
    iterations, best = 1, None
    warm_until = time.perf_counter_ns() + (20e6 if quick else 50e6)
    while True:
        start = time.perf_counter_ns()
        op(iterations)
        elapsed = time.perf_counter_ns() - start
        long_enough = elapsed >= target_ns / 8 or byte_len >= LARGE_BYTES
        if long_enough:
            per_op = elapsed / iterations
            best = per_op if best is None else min(best, per_op)
            if time.perf_counter_ns() >= warm_until:
                break
        else:
            iterations *= 2
    if byte_len >= LARGE_BYTES:
        iterations = 1
    else:
        iterations = max(1, int(target_ns / max(best, 1.0)))
    per_op = []
    for _ in range(samples):
        start = time.perf_counter_ns()
        op(iterations)
        per_op.append((time.perf_counter_ns() - start) / iterations)
    per_op.sort()
    return (statistics.median(per_op), quantile(per_op, 0.1),
            quantile(per_op, 0.9))


def csv_field(text):
    if any(c in text for c in ',"\n'):
        return '"' + text.replace('"', '""') + '"'
    return text


class Rows:
    def __init__(self, out, quick, prefixes):
        self.out, self.quick, self.prefixes = out, quick, prefixes

    def wants(self, scenario):
        """Whether --scenario asked for scenario (all when not given)."""
        return not self.prefixes or any(
            scenario.startswith(prefix) for prefix in self.prefixes)

    def add(self, scenario, variant, role, byte_len, op, prepare=None):
        if prepare is not None:
            median, p10, p90 = measure_prepared(op, prepare, self.quick)
        else:
            median, p10, p90 = measure(op, byte_len, self.quick)
        self.out.write("%s,%s,%s,%d,1,%.6g,%.6g,%.6g,ns,\n" % (
            scenario, csv_field(variant), role, byte_len, median, p10, p90))
        self.out.flush()
        print("%-28s %-44s %12.1f ns" % (scenario, variant, median),
              file=sys.stderr)


def check(what, expected, actual):
    if bytes(expected) != bytes(actual):
        raise SystemExit("measure.py: %s came back wrong" % what)


# ---------------------------------------------------------------------------
# PyTorch
# ---------------------------------------------------------------------------
def torch_rows(rows, torch):
    cuda = torch.device("cuda")
    sync = torch.cuda.synchronize

    def random_bytes(n, pinned=False):
        host = torch.empty(n, dtype=torch.uint8, pin_memory=pinned)
        host.copy_(torch.randint(0, 256, (n,), dtype=torch.uint8))
        return host

    if rows.wants("transfer/scattered"):
        torch_scattered_rows(rows, torch, random_bytes)
    if rows.wants("share/"):
        torch_share_rows(rows, torch)
    if not rows.wants("transfer/small-roundtrip"):
        return  # --scenario asked for the rows above only

    # 4 KiB up and back: .cpu() returns once the bytes are on the host.
    host = random_bytes(SMALL_BYTES)
    check("torch 4 KiB round trip", host.numpy(), host.to(cuda).cpu().numpy())

    def roundtrip(n):
        for _ in range(n):
            host.to(cuda).cpu()
    rows.add("transfer/small-roundtrip", "4 KiB tensor to GPU and back",
             "torch", SMALL_BYTES, roundtrip)

    for size in SIZES:
        device = torch.empty(size, dtype=torch.uint8, device=cuda)
        for pinned in (False, True):
            host = random_bytes(size, pinned)
            back = torch.empty(size, dtype=torch.uint8, pin_memory=pinned)
            device.copy_(host, non_blocking=pinned)
            back.copy_(device, non_blocking=pinned)
            sync()
            check("torch %d-byte copies" % size, host.numpy(), back.numpy())
            series = "torch pinned" if pinned else "torch pageable"

            def upload(n, host=host, pinned=pinned):
                for _ in range(n):
                    device.copy_(host, non_blocking=pinned)
                    sync()

            def download(n, back=back, pinned=pinned):
                for _ in range(n):
                    back.copy_(device, non_blocking=pinned)
                    sync()
            rows.add("transfer/upload-sweep", series, "torch", size, upload)
            rows.add("transfer/download-sweep", series, "torch", size,
                     download)
        del device

    # Every other 4 KiB piece of a 512 KiB buffer: index_select gathers
    # them on the device, one copy brings the 256 KiB out.
    source_host = random_bytes(2 * PIECES * PIECE_BYTES)
    source = source_host.to(cuda).view(2 * PIECES, PIECE_BYTES)
    index = torch.arange(0, 2 * PIECES, 2, device=cuda)
    expected = source_host.view(2 * PIECES, PIECE_BYTES)[::2].reshape(-1)
    check("torch gather", expected.numpy(),
          source.index_select(0, index).reshape(-1).cpu().numpy())

    def gather(n):
        for _ in range(n):
            source.index_select(0, index).cpu()
    rows.add("transfer/fused-reads", "64 strided 4 KiB reads by gather + copy",
             "torch", PIECES * PIECE_BYTES, gather)

    # The same pieces written from malloc memory: one copy up, index_copy_
    # places them; the rows between keep their bytes.
    pieces = random_bytes(PIECES * PIECE_BYTES)
    target = random_bytes(2 * PIECES * PIECE_BYTES).to(cuda).view(
        2 * PIECES, PIECE_BYTES)
    model = target.cpu()
    model[::2] = pieces.view(PIECES, PIECE_BYTES)
    target.index_copy_(0, index, pieces.to(cuda).view(PIECES, PIECE_BYTES))
    check("torch scatter", model.numpy(), target.cpu().numpy())

    def scatter(n):
        for _ in range(n):
            target.index_copy_(0, index,
                               pieces.to(cuda).view(PIECES, PIECE_BYTES))
            sync()
    rows.add("transfer/fused-writes",
             "64 strided 4 KiB writes by copy + scatter", "torch",
             PIECES * PIECE_BYTES, scatter)

    values = torch.arange(SMALL_BYTES // 4, dtype=torch.float32)
    check("torch add one", (values + 1).numpy().tobytes(),
          (values.to(cuda) + 1).cpu().numpy().tobytes())

    def add_one(n):
        for _ in range(n):
            (values.to(cuda) + 1).cpu()
    rows.add("dispatch/borrowed-small", "4 KiB in, add one, 4 KiB out",
             "torch", SMALL_BYTES, add_one)


def piece_offsets(irregular, seed=38):
    """curd-bench's pieces: one in each 8 KiB, at its start or (irregular)
    at a random 64-byte point of its free half."""
    import random
    chooser = random.Random(seed)
    return [i * STRIDE_BYTES + (chooser.randrange(
        (STRIDE_BYTES - PIECE_BYTES) // 64 + 1) * 64 if irregular else 0)
        for i in range(PIECES)]


def torch_scattered_rows(rows, torch, random_bytes):
    """curd-bench's transfer/scattered-* scenarios, warm and cold, as a
    PyTorch user would write them: rows of a 2-D view of the device buffer
    picked by index_select (reads) or placed by index_copy_ (writes), 4 KiB
    rows for pieces at one stride, 64-byte rows for irregular ones (4096
    indices)."""
    cuda = torch.device("cuda")
    sync = torch.cuda.synchronize
    total = PIECES * PIECE_BYTES
    source_bytes = PIECES * STRIDE_BYTES
    source_host = random_bytes(source_bytes)
    source = source_host.to(cuda)
    # The cold region's filler: the pieces first (a write finds them at the
    # region's start after each refill), random bytes after.
    region = torch.empty(REGION_BYTES, dtype=torch.uint8)
    filler = torch.randint(0, 256, (REGION_BYTES,), dtype=torch.uint8,
                           device=cuda)

    def refill():
        region.copy_(filler)  # pageable: synchronous

    for irregular in (False, True):
        offsets = piece_offsets(irregular)
        row = 64 if irregular else PIECE_BYTES
        rows_per_piece = PIECE_BYTES // row
        index = torch.tensor([o // row + r for o in offsets
                              for r in range(rows_per_piece)],
                             dtype=torch.int64, device=cuda)
        expected = torch.cat([source_host[o:o + PIECE_BYTES]
                              for o in offsets])
        filler[:total].copy_(expected.to(cuda))
        view = source.view(-1, row)
        suffix = "-irregular" if irregular else ""
        layout = ("at random points, 64-byte rows" if irregular
                  else "at one stride, 4 KiB rows")

        # Reads: index_select, then one copy_ into host memory.
        warm = torch.empty(total, dtype=torch.uint8)
        cold = region[:total]
        for destination in (warm, cold):
            destination.fill_(0x5A)
            destination.copy_(view.index_select(0, index).view(-1))
            check("torch scattered reads", expected.numpy(),
                  destination.numpy())

        def read_into(destination):
            def op(n):
                for _ in range(n):
                    destination.copy_(view.index_select(0, index).view(-1))
            return op

        def read_cpu(n):
            for _ in range(n):
                view.index_select(0, index).cpu()
        what = "64 x 4 KiB %s: index_select + copy_" % layout
        if rows.wants("transfer/scattered-reads" + suffix):
            rows.add("transfer/scattered-reads" + suffix,
                     what + " into warm pageable memory", "torch", total,
                     read_into(warm))
            rows.add("transfer/scattered-reads" + suffix + "-cold",
                     what + " into the start of 256 MiB a pageable copy "
                     "just filled", "torch", total, read_into(cold),
                     prepare=refill)
            rows.add("transfer/scattered-reads" + suffix + "-cold",
                     "64 x 4 KiB %s: index_select + .cpu(), after the same "
                     "refill" % layout, "torch", total, read_cpu,
                     prepare=refill)

        # Writes: one copy up, index_copy_ places the rows.
        target = torch.empty(source_bytes, dtype=torch.uint8, device=cuda)
        target_view = target.view(-1, row)
        refill()
        for origin in (expected, region[:total]):
            target.fill_(0x5A)
            target_view.index_copy_(0, index, origin.to(cuda).view(-1, row))
            sync()
            back = target.cpu().view(-1, row).index_select(
                0, index.cpu()).view(-1)
            check("torch scattered writes", expected.numpy(), back.numpy())

        def write_from(origin):
            def op(n):
                for _ in range(n):
                    target_view.index_copy_(0, index,
                                            origin.to(cuda).view(-1, row))
                    sync()
            return op
        what = "64 x 4 KiB %s: one copy up + index_copy_" % layout
        if rows.wants("transfer/scattered-writes" + suffix):
            rows.add("transfer/scattered-writes" + suffix,
                     what + " from warm pageable memory", "torch", total,
                     write_from(expected))
            rows.add("transfer/scattered-writes" + suffix + "-cold",
                     what + " from the start of 256 MiB a pageable copy "
                     "just filled", "torch", total, write_from(region[:total]),
                     prepare=refill)
    del filler, region


def share_consumer(tensors, answers):
    """The other process of torch_share_rows: takes what comes, answers,
    drops it (a tensor's IPC mapping closes with it)."""
    while True:
        item = tensors.get()
        if item is None:
            return
        if isinstance(item, tuple):  # the check: a checksum of the bytes
            answer = int(item[1][:1 << 20].sum())
        else:
            answer = 1
        del item  # before the answer, so that the close is timed too
        answers.put(answer)


def torch_share_rows(rows, torch):
    """curd-bench's share/export-import-map: a 256 MiB CUDA tensor through
    a torch.multiprocessing queue to a spawned process, which rebuilds it
    from its CUDA IPC handle (reductions.rebuild_cuda_tensor) and drops it;
    and the queue's round trip alone."""
    import torch.multiprocessing  # its reductions share CUDA tensors
    context = torch.multiprocessing.get_context("spawn")
    tensors, answers = context.Queue(), context.Queue()
    consumer = context.Process(target=share_consumer,
                               args=(tensors, answers))
    consumer.start()
    try:
        shared = torch.randint(0, 256, (REGION_BYTES,), dtype=torch.uint8,
                               device="cuda")
        tensors.put(("check", shared))
        if answers.get(timeout=120) != int(shared[:1 << 20].sum()):
            raise SystemExit("measure.py: the shared tensor came back wrong")

        def share(n):
            for _ in range(n):
                tensors.put(shared)
                answers.get()

        def ping(n):
            for _ in range(n):
                tensors.put(0)
                answers.get()
        rows.add("share/export-import-map",
                 "a 256 MiB CUDA tensor through a torch.multiprocessing "
                 "queue, rebuilt and dropped there, + an answer", "torch", 0,
                 share)
        rows.add("share/export-import-map",
                 "an int through the same queue + an answer (the round trip "
                 "alone)", "torch", 0, ping)
    finally:
        tensors.put(None)
        consumer.join(timeout=60)


# ---------------------------------------------------------------------------
# CuPy
# ---------------------------------------------------------------------------
def cupy_rows(rows, cp, np):
    import cupyx

    stream = cp.cuda.get_current_stream()
    generator = np.random.default_rng()

    def host_bytes(n, pinned=False):
        host = cupyx.empty_pinned((n,), dtype=np.uint8) if pinned else \
            np.empty(n, dtype=np.uint8)
        host[:] = generator.integers(0, 256, n, dtype=np.uint8)
        return host

    host = host_bytes(SMALL_BYTES)
    check("cupy 4 KiB round trip", host, cp.asnumpy(cp.asarray(host)))

    def roundtrip(n):
        for _ in range(n):
            cp.asnumpy(cp.asarray(host))
    rows.add("transfer/small-roundtrip", "4 KiB array to GPU and back",
             "cupy", SMALL_BYTES, roundtrip)

    for size in SIZES:
        device = cp.empty(size, dtype=cp.uint8)
        for pinned in (False, True):
            host = host_bytes(size, pinned)
            back = host_bytes(size, pinned)
            device.set(host, stream=stream)
            device.get(stream=stream, out=back)
            stream.synchronize()
            check("cupy %d-byte copies" % size, host, back)
            series = "cupy pinned" if pinned else "cupy pageable"

            def upload(n, host=host):
                for _ in range(n):
                    device.set(host, stream=stream)
                    stream.synchronize()

            def download(n, back=back):
                for _ in range(n):
                    device.get(stream=stream, out=back)
                    stream.synchronize()
            rows.add("transfer/upload-sweep", series, "cupy", size, upload)
            rows.add("transfer/download-sweep", series, "cupy", size,
                     download)
        del device

    source_host = host_bytes(2 * PIECES * PIECE_BYTES)
    source = cp.asarray(source_host).reshape(2 * PIECES, PIECE_BYTES)
    index = cp.arange(0, 2 * PIECES, 2)
    expected = source_host.reshape(2 * PIECES, PIECE_BYTES)[::2].reshape(-1)
    check("cupy gather", expected, cp.asnumpy(source[index]).reshape(-1))

    def gather(n):
        for _ in range(n):
            cp.asnumpy(source[index])
    rows.add("transfer/fused-reads", "64 strided 4 KiB reads by gather + copy",
             "cupy", PIECES * PIECE_BYTES, gather)

    pieces = host_bytes(PIECES * PIECE_BYTES).reshape(PIECES, PIECE_BYTES)
    target_host = host_bytes(2 * PIECES * PIECE_BYTES).reshape(
        2 * PIECES, PIECE_BYTES)
    target = cp.asarray(target_host)
    target_host[::2] = pieces
    target[index] = cp.asarray(pieces)
    check("cupy scatter", target_host, cp.asnumpy(target))

    def scatter(n):
        for _ in range(n):
            target[index] = cp.asarray(pieces)
            stream.synchronize()
    rows.add("transfer/fused-writes",
             "64 strided 4 KiB writes by copy + scatter", "cupy",
             PIECES * PIECE_BYTES, scatter)

    values = np.arange(SMALL_BYTES // 4, dtype=np.float32)
    check("cupy add one", (values + 1).tobytes(),
          cp.asnumpy(cp.asarray(values) + 1).tobytes())

    def add_one(n):
        for _ in range(n):
            cp.asnumpy(cp.asarray(values) + 1)
    rows.add("dispatch/borrowed-small", "4 KiB in, add one, 4 KiB out",
             "cupy", SMALL_BYTES, add_one)


# ---------------------------------------------------------------------------
def available_peers():
    """(name, runner) for each library that imports and sees a GPU, and a
    note for each that does not."""
    peers, notes = [], []
    try:
        import torch
        if torch.cuda.is_available():
            peers.append(("torch", lambda rows: torch_rows(rows, torch)))
        else:
            notes.append("torch %s sees no CUDA GPU" % torch.__version__)
    except ImportError:
        notes.append("torch is not installed")
    try:
        import cupy
        import numpy
        if cupy.cuda.runtime.getDeviceCount() > 0:
            peers.append(("cupy", lambda rows: cupy_rows(rows, cupy, numpy)))
        else:
            notes.append("cupy %s sees no CUDA GPU" % cupy.__version__)
    except ImportError:
        notes.append("cupy (or numpy) is not installed")
    except Exception as error:  # cupy raises its own error without a driver
        notes.append("cupy cannot reach a GPU (%s)" % error)
    return peers, notes


def metadata():
    """The "# key: value" lines curd-bench writes before its header too
    (generator, device, driver, date), for the charts' titles."""
    lines = [("generator", "bench/peers/measure.py")]
    try:
        import torch
        if torch.cuda.is_available():
            lines.append(("device", torch.cuda.get_device_name(0)))
    except ImportError:
        pass
    try:
        import cupy
        version = cupy.cuda.runtime.driverGetVersion()
        lines.append(("driver", "CUDA %d.%d (%d)" % (
            version // 1000, version % 1000 // 10, version)))
    except Exception:  # no cupy, or no driver: the chart says "unknown"
        pass
    lines.append(("date", time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())))
    return lines


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--csv", metavar="PATH",
                        help="write the rows to PATH (default: stdout)")
    parser.add_argument("--quick", action="store_true",
                        help="fewer, shorter samples")
    parser.add_argument("--only", choices=["torch", "cupy"],
                        help="measure one library")
    parser.add_argument("--scenario", action="append", default=[],
                        metavar="PREFIX",
                        help="only the scenarios whose names start with "
                        "PREFIX (repeatable; torch: transfer/scattered, "
                        "share/; the rest come as one group)")
    args = parser.parse_args()

    peers, notes = available_peers()
    for note in notes:
        print("measure.py: %s; skipping it" % note, file=sys.stderr)
    peers = [p for p in peers if args.only in (None, p[0])]
    if not peers:
        print("measure.py: nothing to measure here (no GPU, or neither torch "
              "nor cupy); no rows written", file=sys.stderr)
        return 0

    out = open(args.csv, "w") if args.csv else sys.stdout
    try:
        for key, value in metadata():
            out.write("# %s: %s\n" % (key, value))
        out.write(HEADER + "\n")
        rows = Rows(out, args.quick, args.scenario)
        for name, run in peers:
            print("measure.py: measuring %s" % name, file=sys.stderr)
            run(rows)
    finally:
        if out is not sys.stdout:
            out.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
