/* The summary-level LCS hit count of ROUGE-LSum, as rouge_score 0.1.2 computes it
 * (rouge_scorer._summary_level_lcs with _lcs_table / _backtrack_norec / _union_lcs),
 * on sentences whose tokens score.py has mapped to integer ids. Same table, same
 * backtracking tie-break, same clipped counting: only faster. score.py checks it against
 * rouge_score itself (score.py --self-test).
 *
 * ref, cand: token ids, sentences back to back; ref_off[0..nr], cand_off[0..nc]: sentence
 * boundaries; vocab: number of distinct ids. Returns the hit count, or -1 when out of memory. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

long rouge_lsum_hits(const int32_t *ref, const int32_t *ref_off, int nr,
                     const int32_t *cand, const int32_t *cand_off, int nc, int vocab) {
    long total_r = ref_off[nr], total_c = cand_off[nc], hits = 0;
    int32_t *cnt_r = calloc((size_t)vocab, sizeof(int32_t));
    int32_t *cnt_c = calloc((size_t)vocab, sizeof(int32_t));
    int maxr = 0, maxc = 0;
    for (int s = 0; s < nr; s++) if (ref_off[s + 1] - ref_off[s] > maxr) maxr = ref_off[s + 1] - ref_off[s];
    for (int s = 0; s < nc; s++) if (cand_off[s + 1] - cand_off[s] > maxc) maxc = cand_off[s + 1] - cand_off[s];
    uint32_t *table = malloc(sizeof(uint32_t) * (size_t)(maxr + 1) * (size_t)(maxc + 1));
    unsigned char *mark = malloc((size_t)maxr + 1);
    if (!cnt_r || !cnt_c || !table || !mark) { free(cnt_r); free(cnt_c); free(table); free(mark); return -1; }
    for (long i = 0; i < total_r; i++) cnt_r[ref[i]]++;
    for (long i = 0; i < total_c; i++) cnt_c[cand[i]]++;
    for (int rs = 0; rs < nr; rs++) {
        const int32_t *r = ref + ref_off[rs];
        int rl = ref_off[rs + 1] - ref_off[rs];
        memset(mark, 0, (size_t)rl + 1);
        for (int cs = 0; cs < nc; cs++) {
            const int32_t *c = cand + cand_off[cs];
            int cl = cand_off[cs + 1] - cand_off[cs];
            size_t w = (size_t)cl + 1;
            for (int j = 0; j <= cl; j++) table[j] = 0;
            for (int i = 1; i <= rl; i++) {
                uint32_t *row = table + (size_t)i * w, *up = row - w;
                row[0] = 0;
                int32_t ri = r[i - 1];
                for (int j = 1; j <= cl; j++) {
                    if (ri == c[j - 1]) row[j] = up[j - 1] + 1;
                    else row[j] = up[j] > row[j - 1] ? up[j] : row[j - 1];
                }
            }
            int i = rl, j = cl;
            while (i > 0 && j > 0) {
                if (r[i - 1] == c[j - 1]) { mark[i - 1] = 1; i--; j--; }
                else if (table[(size_t)i * w + j - 1] > table[(size_t)(i - 1) * w + j]) j--;
                else i--;
            }
        }
        for (int i = 0; i < rl; i++) {
            if (!mark[i]) continue;
            int32_t t = r[i];
            if (cnt_c[t] > 0 && cnt_r[t] > 0) { hits++; cnt_c[t]--; cnt_r[t]--; }
        }
    }
    free(cnt_r); free(cnt_c); free(table); free(mark);
    return hits;
}
