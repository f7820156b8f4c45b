#pragma once
// The accumulator operands of the warpgroup mma wrappers (attention_wgmma_ptx.cuh, matmul_wgmma_ptx.cuh,
// matmul_wgmma_fp8_ptx.cuh): an m64nN instruction with f32 accumulators takes N / 2 of them a thread, as the
// register list "{%0, ..., %(N/2 - 1)}" in its text and as the "+f" operands d[0] ... d[N/2 - 1], in that
// order. The wrappers' own operands follow, numbered from N / 2.

// The register lists of 64 (m64n128) and 128 (m64n256) accumulators.
#define SS_WG_REGS64                                                                                            \
  "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28," \
  "%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,%48,%49,%50,%51,%52,%53,%54,"    \
  "%55,%56,%57,%58,%59,%60,%61,%62,%63}"
#define SS_WG_REGS128                                                                                           \
  "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28," \
  "%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,%48,%49,%50,%51,%52,%53,%54,"    \
  "%55,%56,%57,%58,%59,%60,%61,%62,%63,%64,%65,%66,%67,%68,%69,%70,%71,%72,%73,%74,%75,%76,%77,%78,%79,%80,"    \
  "%81,%82,%83,%84,%85,%86,%87,%88,%89,%90,%91,%92,%93,%94,%95,%96,%97,%98,%99,%100,%101,%102,%103,%104,%105,"  \
  "%106,%107,%108,%109,%110,%111,%112,%113,%114,%115,%116,%117,%118,%119,%120,%121,%122,%123,%124,%125,%126,"   \
  "%127}"

// The "+f" operands d[i] ... d[i + 7], and those of 64 and 128 accumulators.
#define SS_WG_ACC8(d, i)                                                                                      \
  "+f"(d[(i) + 0]), "+f"(d[(i) + 1]), "+f"(d[(i) + 2]), "+f"(d[(i) + 3]), "+f"(d[(i) + 4]), "+f"(d[(i) + 5]), \
      "+f"(d[(i) + 6]), "+f"(d[(i) + 7])
#define SS_WG_ACC64(d)                                                                                            \
  SS_WG_ACC8(d, 0), SS_WG_ACC8(d, 8), SS_WG_ACC8(d, 16), SS_WG_ACC8(d, 24), SS_WG_ACC8(d, 32), SS_WG_ACC8(d, 40), \
      SS_WG_ACC8(d, 48), SS_WG_ACC8(d, 56)
#define SS_WG_ACC128(d)                                                                                          \
  SS_WG_ACC64(d), SS_WG_ACC8(d, 64), SS_WG_ACC8(d, 72), SS_WG_ACC8(d, 80), SS_WG_ACC8(d, 88), SS_WG_ACC8(d, 96), \
      SS_WG_ACC8(d, 104), SS_WG_ACC8(d, 112), SS_WG_ACC8(d, 120)
