// scalars: every scalar size interleaved with pointers. Thread 0 of block 0
// writes each parameter's bytes, in order, to out (and echoes the 12-byte
// struct into out2), so a test can check that every byte of every
// parameter arrived where the kernel's parameter list says it is.
//
// Layout of out (72 bytes): u8 @0, u16 @2, u32 @4, u64 @8, wide (16) @16,
// narrow (12) @32, tail u8 @44, u64 "mark" @48 (out2's address, so the
// pointer after the scalars is checked too), 16 bytes 0xA5 @56.
struct curd_wide { unsigned long long lo; unsigned long long hi; };      // 16 bytes, align 8
struct curd_narrow { unsigned int a; unsigned int b; unsigned int c; };  // 12 bytes, align 4

extern "C" __global__ void curd_scalars(unsigned char u8, unsigned char *out,
                                        unsigned short u16, unsigned int u32,
                                        struct curd_wide wide,
                                        unsigned long long u64,
                                        struct curd_narrow narrow,
                                        unsigned int *out2,
                                        unsigned char tail)
{
    if (blockIdx.x != 0 || threadIdx.x != 0)
        return;
    out[0] = u8;
    out[1] = 0;
    *(unsigned short *)(out + 2) = u16;
    *(unsigned int *)(out + 4) = u32;
    *(unsigned long long *)(out + 8) = u64;
    *(unsigned long long *)(out + 16) = wide.lo;
    *(unsigned long long *)(out + 24) = wide.hi;
    *(unsigned int *)(out + 32) = narrow.a;
    *(unsigned int *)(out + 36) = narrow.b;
    *(unsigned int *)(out + 40) = narrow.c;
    out[44] = tail;
    out[45] = 0;
    out[46] = 0;
    out[47] = 0;
    *(unsigned long long *)(out + 48) = (unsigned long long)out2;
    for (int i = 56; i < 72; i++)
        out[i] = 0xA5;
    out2[0] = narrow.a;
    out2[1] = narrow.b;
    out2[2] = narrow.c;
}
