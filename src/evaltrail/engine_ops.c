/* Log-softmax at chosen tokens, built with the pinned engine and part of its identity.
 *
 * Why not numpy: its exp dispatches on the CPU at run time (an AVX-512 machine and an AVX2
 * machine give different last bits), so the same logits would give different logprobs on two
 * machines that share the pinned llama.cpp. Here exp and log are written out with plain
 * arithmetic and compiled once by the pinned toolchain for the profile's instruction set, with
 * a summation order fixed by the code, so the result depends only on the logits.
 * Rows are independent: callers split them across threads.
 */
#include <stdint.h>
#include <string.h>

static const double LN2_HI = 0x1.62e42fefa3800p-1;
static const double LN2_LO = 0x1.ef35793c76730p-45;
static const double INV_LN2 = 0x1.71547652b82fep0;
static const double SHIFTER = 0x1.8p52;

static inline double from_bits(uint64_t u) { double d; memcpy(&d, &u, 8); return d; }
static inline uint64_t to_bits(double d) { uint64_t u; memcpy(&u, &d, 8); return u; }

typedef double v8d __attribute__((vector_size(64)));
typedef int64_t v8i __attribute__((vector_size(64)));
typedef float v8f __attribute__((vector_size(32)));

/* exp(x) for x <= 0, eight at a time: x = k ln2 + r with |r| <= ln2/2, exp(r) by its Taylor
 * polynomial to r^13 (truncation below 1e-17), times 2^k by the exponent bits; 0 below -708
 * (no subnormals). Vector extensions, so every lane runs the same operations in the same order. */
static inline v8d exp_nonpos8(v8d x) {
    v8i low = x < -708.0;
    v8d xc = (v8d)(((v8i)x & ~low) | ((v8i)((v8d){0} - 708.0) & low));
    v8d kd = xc * INV_LN2 + SHIFTER;
    v8i ki = (v8i)kd;
    kd -= SHIFTER;
    v8d r = (xc - kd * LN2_HI) - kd * LN2_LO;
    v8d p = (v8d){0} + 1.0 / 6227020800.0;
    p = p * r + 1.0 / 479001600.0;
    p = p * r + 1.0 / 39916800.0;
    p = p * r + 1.0 / 3628800.0;
    p = p * r + 1.0 / 362880.0;
    p = p * r + 1.0 / 40320.0;
    p = p * r + 1.0 / 5040.0;
    p = p * r + 1.0 / 720.0;
    p = p * r + 1.0 / 120.0;
    p = p * r + 1.0 / 24.0;
    p = p * r + 1.0 / 6.0;
    p = p * r + 0.5;
    p = p * r + 1.0;
    p = p * r + 1.0;
    v8i e = (v8i)p + (ki << 52);
    return (v8d)(e & ~low);
}

/* log(s) for s >= 1: s = 2^e m with m in [sqrt(1/2), sqrt(2)), log(m) = 2 atanh(u),
 * u = (m - 1) / (m + 1), |u| <= 0.172, by its series to u^25. */
static double log_ge1(double s) {
    uint64_t b = to_bits(s);
    int64_t e = (int64_t)((b >> 52) & 0x7ff) - 1023;
    double m = from_bits((b & 0x000fffffffffffffULL) | 0x3ff0000000000000ULL);
    if (m > 0x1.6a09e667f3bcdp0) { m *= 0.5; e += 1; }
    double u = (m - 1.0) / (m + 1.0), u2 = u * u;
    double p = 1.0 / 25;
    for (int k = 23; k >= 1; k -= 2) p = p * u2 + 1.0 / k;
    return (double)e * LN2_HI + ((double)e * LN2_LO + 2.0 * u * p);
}

/* For each row i of `rows` (n_rows x n_vocab, row-major float32): logprob[i] = log softmax of
 * rows[i] at targets[i] (at the argmax where targets[i] < 0; skipped when targets is NULL),
 * argmax[i] = the first index of the row's maximum. */
void evaltrail_log_softmax_at(const float *rows, int64_t n_rows, int64_t n_vocab, const int32_t *targets,
                              double *logprob, int32_t *argmax) {
    for (int64_t i = 0; i < n_rows; i++) {
        const float *row = rows + i * n_vocab;
        float peak = row[0];
        for (int64_t v = 1; v < n_vocab; v++) peak = row[v] > peak ? row[v] : peak;
        int64_t best = 0;
        while (row[best] != peak) best++;
        argmax[i] = (int32_t)best;
        if (!targets) continue;
        const double top = (double)peak;
        v8d acc = {0};
        int64_t v = 0;
        for (; v + 8 <= n_vocab; v += 8) {
            v8f f;
            memcpy(&f, row + v, sizeof f);
            acc += exp_nonpos8(__builtin_convertvector(f, v8d) - top);
        }
        if (v < n_vocab) {  /* the tail, padded with values whose exp is 0 */
            v8f f;
            for (int l = 0; l < 8; l++) f[l] = v + l < n_vocab ? row[v + l] : -3.0e38f;
            acc += exp_nonpos8(__builtin_convertvector(f, v8d) - top);
        }
        double sum = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
        const int64_t t = targets[i] < 0 ? best : targets[i];
        logprob[i] = ((double)row[t] - top) - log_ge1(sum);
    }
}
