// gather.cu - the transfer engine's two kernels (lib/transfer/gather.c launches
// them; lib/transfer/plan.h says when). curd_gather packs scattered ranges of
// device memory into one contiguous staging area in page-locked host
// memory, writing across the bus; curd_scatter places them back from it,
// reading across the bus. `make kernels-ptx` turns this file into lib/transfer/gather.ptx,
// which the library embeds; the build itself never needs nvcc.
//
// One launch moves up to CURD_GATHER_PIECES pieces, passed by value in
// the kernel's parameters (no table to upload first). The pieces lie back
// to back in the staging area, in stage_offset order, between range_start
// and range_end. Block b handles the 4 KiB tile starting at
// range_start + b * 4096 of the staging area: it finds the first piece
// that reaches into the tile by binary search (every thread of the block
// reads the same parameter words), then copies each piece's part of the
// tile, 16 bytes per thread where source and destination share their
// alignment. Pieces never share device bytes (lib/transfer/plan.h), so no two
// blocks write the same byte.
//
// A curd_gather launch whose table names a signal_offset also says when it
// is done, for a host thread that polls instead of asking the stream
// (lib/launch/batch.c, the last read-back of a graph): once every thread of
// block b has written its part, the block's first thread makes those writes
// visible system-wide and writes 1 to the word at stage + signal_offset +
// 4 * b. The barrier orders the block's writes before that thread's fence,
// which is cumulative, so one fence serves the block (a fence in every
// thread measured 0.1 to 0.57 us slower at the end of a graph on the H100).

#define CURD_GATHER_PIECES 254
#define CURD_GATHER_TILE 4096u

struct curd_gather_piece {
    unsigned long long device_ptr; // the piece's first byte on the device
    unsigned int stage_offset;     // where it sits in the staging area
    unsigned int byte_len;
};

// 16 + 254 * 16 = 4080 bytes: with the staging pointer, 4088 of the 4096
// bytes of parameters every CUDA 12 driver takes.
struct curd_gather_table {
    unsigned int count;       // pieces used, 1 to CURD_GATHER_PIECES
    unsigned int range_start; // the staging bytes this launch covers
    unsigned int range_end;
    unsigned int signal_offset; // curd_gather: 0, or where block 0's word is
    curd_gather_piece piece[CURD_GATHER_PIECES];
};

// dst[0, n) = src[0, n) by the threads of one block, Word by Word where
// dst and src share their offset within a Word: the bytes up to dst's
// next Word boundary, whole Words, then the tail.
template <typename Word>
__device__ static void copy_words(unsigned char *dst, const unsigned char *src,
                                  unsigned int n)
{
    const unsigned int size = sizeof(Word);
    unsigned int t = threadIdx.x;
    unsigned int stride = blockDim.x;
    unsigned int head = (unsigned int)(-(unsigned long long)dst & (size - 1u));
    if (head > n)
        head = n;
    if (t < head)
        dst[t] = src[t];
    unsigned int words = (n - head) / size;
    Word *d = (Word *)(dst + head);
    const Word *s = (const Word *)(src + head);
    for (unsigned int i = t; i < words; i += stride)
        d[i] = s[i];
    unsigned int done = head + words * size;
    if (t < n - done)
        dst[done + t] = src[done + t];
}

// 16-byte words where the two ranges allow it, else 4-byte, else bytes.
__device__ static void copy_range(unsigned char *dst, const unsigned char *src,
                                  unsigned int n)
{
    unsigned long long mismatch =
        (unsigned long long)dst ^ (unsigned long long)src;
    if ((mismatch & 15u) == 0)
        copy_words<uint4>(dst, src, n);
    else if ((mismatch & 3u) == 0)
        copy_words<unsigned int>(dst, src, n);
    else
        copy_words<unsigned char>(dst, src, n);
}

// Piece's part of the tile [tile_start, tile_end), if any.
template <bool to_stage>
__device__ static void move_piece_part(unsigned char *stage,
                                       const curd_gather_piece &piece,
                                       unsigned int tile_start,
                                       unsigned int tile_end)
{
    unsigned int start = piece.stage_offset;
    unsigned int end = start + piece.byte_len;
    unsigned int from = start > tile_start ? start : tile_start;
    unsigned int to = end < tile_end ? end : tile_end;
    if (from >= to)
        return;
    unsigned char *device = (unsigned char *)piece.device_ptr + (from - start);
    if (to_stage)
        copy_range(stage + from, device, to - from);
    else
        copy_range(device, stage + from, to - from);
}

template <bool to_stage>
__device__ static void move_tile(unsigned char *stage,
                                 const curd_gather_table &table)
{
    unsigned int tile_start = table.range_start + blockIdx.x * CURD_GATHER_TILE;
    if (tile_start >= table.range_end)
        return;
    unsigned int tile_end = table.range_end - tile_start > CURD_GATHER_TILE
                                ? tile_start + CURD_GATHER_TILE
                                : table.range_end;
    // One piece (a batch's single read-back, a single range): its fields
    // sit at fixed offsets of the parameters, which the compiler reads as
    // constant operands instead of indexed loads (0.05 to 0.1 us sooner
    // at the end of a graph on the H100 of doc/PERFORMANCE.md).
    if (table.count == 1) {
        move_piece_part<to_stage>(stage, table.piece[0], tile_start, tile_end);
        return;
    }
    // The last piece that starts at or before the tile.
    unsigned int low = 0, high = table.count;
    while (high - low > 1) {
        unsigned int middle = (low + high) / 2u;
        if (table.piece[middle].stage_offset <= tile_start)
            low = middle;
        else
            high = middle;
    }
    for (unsigned int i = low;
         i < table.count && table.piece[i].stage_offset < tile_end; i++)
        move_piece_part<to_stage>(stage, table.piece[i], tile_start, tile_end);
}

// __grid_constant__: the table is read in place from the parameter space,
// not copied per thread.
extern "C" __global__ void curd_gather(unsigned char *stage,
                                       const __grid_constant__ curd_gather_table table)
{
    move_tile<true>(stage, table);
    if (table.signal_offset == 0)
        return;
    __syncthreads();
    if (threadIdx.x == 0) {
        __threadfence_system();
        ((volatile unsigned int *)(stage + table.signal_offset))[blockIdx.x] = 1u;
    }
}

extern "C" __global__ void curd_scatter(unsigned char *stage,
                                        const __grid_constant__ curd_gather_table table)
{
    move_tile<false>(stage, table);
}
