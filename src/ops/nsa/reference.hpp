// CPU references of the NSA family (SPEC.md §2.15-2.17), written for clarity, not speed: every formula
// in double from the exact input values (nsa_topk also rounds q * scale to the input dtype, as its
// step 1 says), outputs rounded once (RNE). Tensors are host tensors of a validated call, read and
// written through their strides. The metadata are trusted (caller contract); a token whose request id
// or chunk row falls outside the tensors is treated as having no keys rather than read out of bounds.
#pragma once
#include "ops/nsa/nsa_common.hpp"

namespace attnjit::ops::reference {

// o[t, h] = softmax over the complete chunks c < (p + 1) // bs of token t's request n of
// scale * <q[t, h], k_cmp[chunk_offsets[n] + c, r(h)]>, values v_cmp; lse (if given) the fp32 natural
// log of the normaliser. No complete chunk: o = 0, lse = -inf.
void nsa_compressed_fwd(const nsa::CompressedConfig& cfg, const nsa::CompressedCall& call);

// block_indices[t, r, :]: the min(S, cur + 1) chunks of [0, cur] (cur = p // bs) with the highest group
// importance (forced chunks 0, cur - 1, cur score G), then -1. Order: descending importance, ties by
// ascending chunk id (the reference's choice; SPEC.md §2.16 leaves order and ties unspecified).
void nsa_topk(const nsa::TopkConfig& cfg, const nsa::TopkCall& call);

// o[t, h] = softmax over the keys of the selected blocks (slots u < block_counts[t, r]; -1 and blocks
// starting at or past the limit skipped; the limit p + 1 when causal, len_n otherwise; a repeated id
// counts twice) of scale * <q[t, h], k_x>, values v_x. No visible key: o = 0.
void nsa_selected_fwd(const nsa::SelectedConfig& cfg, const nsa::SelectedCall& call);

}  // namespace attnjit::ops::reference
