/* float16.h - IEEE half and bfloat16 conversions for the tests: the
 * stand-in NCCL reduces halves through float, and the collective tests
 * build their host references the same way (round to nearest even). */
#ifndef CURD_TESTS_SUPPORT_FLOAT16_H
#define CURD_TESTS_SUPPORT_FLOAT16_H

#include <stdint.h>
#include <string.h>

static inline float float16_to_float(uint16_t h)
{
    uint32_t sign = (uint32_t)(h >> 15) << 31, exponent = (h >> 10) & 31u,
             mantissa = h & 1023u, bits;
    if (exponent == 0 && mantissa == 0)
        bits = sign;
    else if (exponent == 0) { /* subnormal: normalise */
        exponent = 113;
        while ((mantissa & 1024u) == 0) {
            mantissa <<= 1;
            exponent--;
        }
        bits = sign | exponent << 23 | (mantissa & 1023u) << 13;
    } else if (exponent == 31)
        bits = sign | 0x7f800000u | mantissa << 13;
    else
        bits = sign | (exponent + 112) << 23 | mantissa << 13;
    float value;
    memcpy(&value, &bits, sizeof value);
    return value;
}

static inline uint16_t float_to_float16(float value)
{
    uint32_t bits;
    memcpy(&bits, &value, sizeof bits);
    uint16_t sign = (uint16_t)((bits >> 16) & 0x8000u);
    int exponent = (int)((bits >> 23) & 255u) - 112;
    uint32_t mantissa = bits & 0x7fffffu;
    if (((bits >> 23) & 255u) == 255u)
        return (uint16_t)(sign | 0x7c00u | (mantissa != 0 ? 0x200u : 0));
    if (exponent >= 31)
        return (uint16_t)(sign | 0x7c00u);
    if (exponent <= 0) {
        if (exponent < -10)
            return sign;
        mantissa |= 0x800000u;
        unsigned shift = (unsigned)(14 - exponent);
        uint32_t half = mantissa >> shift, rest = mantissa & ((1u << shift) - 1);
        uint32_t midpoint = 1u << (shift - 1);
        if (rest > midpoint || (rest == midpoint && (half & 1u)))
            half++;
        return (uint16_t)(sign | half);
    }
    uint32_t half = (uint32_t)exponent << 10 | mantissa >> 13;
    uint32_t rest = mantissa & 0x1fffu;
    if (rest > 0x1000u || (rest == 0x1000u && (half & 1u)))
        half++; /* may carry into the exponent, as rounding should */
    return (uint16_t)(sign | half);
}

static inline float bfloat16_to_float(uint16_t b)
{
    uint32_t bits = (uint32_t)b << 16;
    float value;
    memcpy(&value, &bits, sizeof value);
    return value;
}

static inline uint16_t float_to_bfloat16(float value)
{
    uint32_t bits;
    memcpy(&bits, &value, sizeof bits);
    if ((bits & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((bits >> 16) | 0x40u);
    bits += 0x7fffu + ((bits >> 16) & 1u);
    return (uint16_t)(bits >> 16);
}

#endif
