// nsa_topk, hopper backend (sm_90a): the kernel of nsa/nsa_topk.cuh with HOP = true, its Q K^T on
// warpgroup MMA. This file only switches the sm_90a includes on, so that the portable instantiation's
// source (and its cache key) carries none of them.
#pragma once
#define ATTNJIT_NSA_TOPK_HOPPER 1
#include "nsa/nsa_topk.cuh"
