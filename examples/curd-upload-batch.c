/*
 * curd-upload-batch.c - many small transfers in one call each way: a
 * vectored transfer (curd_upload_batch, curd_download_batch), not a batch
 * object (for that, see curd-batch.c).
 *
 *   cc -std=c11 curd-upload-batch.c $(pkg-config --cflags --libs curd) \
 *       -o curd-upload-batch
 *
 * Keeps a 256 KiB table resident on device 0, writes 64 records of 4 KiB
 * into it with one curd_upload_batch (the adjacent records fuse into one
 * DMA), reads every other record back with one curd_download_batch, checks
 * every byte, and prints what the device counted: DMA operations and
 * fences.
 *
 * Exit status, as every program curd ships (curd-info, curd-bench and the
 * examples): 0 when all of that holds; 1 when something failed; 2 for a
 * bad command line (the examples take no arguments); 3 when there is no
 * usable CUDA driver or no device (the library's CURD_E_NO_DRIVER or
 * CURD_E_NO_DEVICE sentence, ending in "Fix: ...", says which). Every
 * error goes to standard error as one line starting "curd-upload-batch: ";
 * standard output carries only results.
 */
#include <curd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { RECORD_BYTES = 4096, RECORD_COUNT = 64 };

static int fail(const char *call, curd_status status)
{
    fprintf(stderr, "curd-upload-batch: %s: %s: %s\n", call,
            curd_status_name(status), curd_last_error());
    return status == CURD_E_NO_DRIVER || status == CURD_E_NO_DEVICE ? 3 : 1;
}

/* Uploads every record, downloads the even ones, compares. */
static int exchange(curd_device *device, curd_buffer table,
                    unsigned char *records, unsigned char *back)
{
    curd_upload uploads[RECORD_COUNT];
    curd_download downloads[RECORD_COUNT / 2];
    curd_stats before = CURD_STATS_INIT;
    curd_stats after = CURD_STATS_INIT;
    curd_status status;

    for (size_t i = 0; i < RECORD_COUNT; i++)
        uploads[i] = (curd_upload){.buffer = table,
                                   .offset = i * RECORD_BYTES,
                                   .src = records + i * RECORD_BYTES,
                                   .byte_len = RECORD_BYTES};
    for (size_t i = 0; i < RECORD_COUNT / 2; i++)
        downloads[i] = (curd_download){.buffer = table,
                                       .offset = 2 * i * RECORD_BYTES,
                                       .byte_len = RECORD_BYTES,
                                       .dst = back + i * RECORD_BYTES,
                                       .dst_capacity = RECORD_BYTES};

    status = curd_device_stats(device, &before);
    if (status == CURD_OK)
        status = curd_upload_batch(device, uploads, RECORD_COUNT);
    if (status == CURD_OK)
        status = curd_download_batch(device, downloads, RECORD_COUNT / 2);
    if (status == CURD_OK)
        status = curd_device_stats(device, &after);
    if (status != CURD_OK)
        return fail("batch transfer", status);

    for (size_t i = 0; i < RECORD_COUNT / 2; i++)
        if (memcmp(back + i * RECORD_BYTES, records + 2 * i * RECORD_BYTES,
                   RECORD_BYTES) != 0) {
            fprintf(stderr, "curd-upload-batch: record %zu came back wrong\n",
                    2 * i);
            return 1;
        }
    printf("64 records up, 32 back: %llu DMA operations, %llu fences\n",
           (unsigned long long)(after.copy_ops - before.copy_ops),
           (unsigned long long)(after.fences - before.fences));
    return 0;
}

int main(int argc, char **argv)
{
    unsigned char *records = malloc(RECORD_BYTES * RECORD_COUNT);
    unsigned char *back = malloc(RECORD_BYTES * RECORD_COUNT / 2);
    curd_device *device = NULL;
    curd_buffer table;
    curd_status status;
    int result;

    if (argc > 1) {
        fprintf(stderr, "curd-upload-batch: unexpected argument '%s'; usage: "
                        "curd-upload-batch\n", argv[1]);
        free(records);
        free(back);
        return 2;
    }
    if (records == NULL || back == NULL) {
        fprintf(stderr, "curd-upload-batch: out of host memory\n");
        free(records);
        free(back);
        return 1;
    }
    for (size_t i = 0; i < RECORD_BYTES * RECORD_COUNT; i++)
        records[i] = (unsigned char)(i / RECORD_BYTES + i * 31u);

    status = curd_device_open(0, NULL, &device);
    if (status == CURD_OK) {
        status = curd_buffer_alloc(device, RECORD_BYTES * RECORD_COUNT,
                                   &table);
        result = status == CURD_OK ? exchange(device, table, records, back)
                                   : fail("curd_buffer_alloc", status);
        /* Closing frees the table too. */
        status = curd_device_close(device);
        if (status != CURD_OK && result == 0)
            result = fail("curd_device_close", status);
    } else {
        result = fail("curd_device_open", status);
    }
    free(records);
    free(back);
    return result;
}
