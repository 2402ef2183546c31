// SPDX-License-Identifier: GPL-3.0-or-later
// Hopper (sm_90a) building blocks shared by the kernels that run wgmma from shared memory: mbarriers,
// the shared-memory matrix descriptors and the m64n256k16 bf16 wgmma. Device code only where the
// target has sm_90a features (TWELL_SM90A_DEVICE); elsewhere the kernels that use them compile empty.
#pragma once
#include <cstdint>

#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define TWELL_SM90A_DEVICE 1
#endif

namespace twell::cuda {

#ifdef TWELL_SM90A_DEVICE
__device__ __forceinline__ std::uint32_t smem_address(const void* pointer) {
  return static_cast<std::uint32_t>(__cvta_generic_to_shared(pointer));
}

__device__ __forceinline__ void mbarrier_init(std::uint64_t* barrier, unsigned count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(smem_address(barrier)), "r"(count));
}

__device__ __forceinline__ void mbarrier_arrive(std::uint64_t* barrier) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(smem_address(barrier)));
}

__device__ __forceinline__ void mbarrier_wait(std::uint64_t* barrier, unsigned parity) {
  asm volatile(
      "{\n"
      ".reg .pred ready;\n"
      "wait_loop:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 ready, [%0], %1;\n"
      "@!ready bra wait_loop;\n"
      "}\n" ::"r"(smem_address(barrier)),
      "r"(parity));
}

// Shared-memory matrix descriptor for a K-major tile with 128-byte swizzle: rows of 64 bf16
// (128 bytes), groups of 8 rows 1024 bytes apart.
__device__ __forceinline__ std::uint64_t swizzle128_descriptor(const void* tile) {
  const std::uint64_t address = smem_address(tile);
  std::uint64_t descriptor = (address & 0x3FFFF) >> 4;
  descriptor |= static_cast<std::uint64_t>(1) << 16;          // leading byte offset (unused with swizzle)
  descriptor |= static_cast<std::uint64_t>(1024 >> 4) << 32;  // stride byte offset: 8 rows
  descriptor |= static_cast<std::uint64_t>(1) << 62;          // 128-byte swizzle
  return descriptor;
}

__device__ __forceinline__ void wgmma_fence() {
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
}
__device__ __forceinline__ void wgmma_commit() {
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}
template <int Pending>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(Pending) : "memory");
}

// acc (+)= A * B for one k16 step, B K-major or (TransposeB) N-major; with `accumulate` 0 the old acc is
// ignored, which spares zeroing 128 registers before every tile.
template <bool TransposeB>
__device__ __forceinline__ void wgmma_m64n256k16(float (&acc)[128], std::uint64_t desc_a,
                                                 std::uint64_t desc_b, std::uint32_t accumulate) {
  asm volatile(
      "{\n"
      ".reg .pred accumulate;\n"
      "setp.ne.b32 accumulate, %130, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, "
      "%22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, "
      "%42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, "
      "%62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, "
      "%82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, %98, %99, %100, %101, "
      "%102, %103, %104, %105, %106, %107, %108, %109, %110, %111, %112, %113, %114, %115, %116, %117, %118, "
      "%119, %120, %121, %122, %123, %124, %125, %126, %127}, "
      "%128, %129, accumulate, 1, 1, 0, %131;\n"
      "}\n"
      : "+f"(acc[0]), "+f"(acc[1]), "+f"(acc[2]), "+f"(acc[3]), "+f"(acc[4]), "+f"(acc[5]), "+f"(acc[6]),
        "+f"(acc[7]), "+f"(acc[8]), "+f"(acc[9]), "+f"(acc[10]), "+f"(acc[11]), "+f"(acc[12]), "+f"(acc[13]),
        "+f"(acc[14]), "+f"(acc[15]), "+f"(acc[16]), "+f"(acc[17]), "+f"(acc[18]), "+f"(acc[19]),
        "+f"(acc[20]), "+f"(acc[21]), "+f"(acc[22]), "+f"(acc[23]), "+f"(acc[24]), "+f"(acc[25]),
        "+f"(acc[26]), "+f"(acc[27]), "+f"(acc[28]), "+f"(acc[29]), "+f"(acc[30]), "+f"(acc[31]),
        "+f"(acc[32]), "+f"(acc[33]), "+f"(acc[34]), "+f"(acc[35]), "+f"(acc[36]), "+f"(acc[37]),
        "+f"(acc[38]), "+f"(acc[39]), "+f"(acc[40]), "+f"(acc[41]), "+f"(acc[42]), "+f"(acc[43]),
        "+f"(acc[44]), "+f"(acc[45]), "+f"(acc[46]), "+f"(acc[47]), "+f"(acc[48]), "+f"(acc[49]),
        "+f"(acc[50]), "+f"(acc[51]), "+f"(acc[52]), "+f"(acc[53]), "+f"(acc[54]), "+f"(acc[55]),
        "+f"(acc[56]), "+f"(acc[57]), "+f"(acc[58]), "+f"(acc[59]), "+f"(acc[60]), "+f"(acc[61]),
        "+f"(acc[62]), "+f"(acc[63]), "+f"(acc[64]), "+f"(acc[65]), "+f"(acc[66]), "+f"(acc[67]),
        "+f"(acc[68]), "+f"(acc[69]), "+f"(acc[70]), "+f"(acc[71]), "+f"(acc[72]), "+f"(acc[73]),
        "+f"(acc[74]), "+f"(acc[75]), "+f"(acc[76]), "+f"(acc[77]), "+f"(acc[78]), "+f"(acc[79]),
        "+f"(acc[80]), "+f"(acc[81]), "+f"(acc[82]), "+f"(acc[83]), "+f"(acc[84]), "+f"(acc[85]),
        "+f"(acc[86]), "+f"(acc[87]), "+f"(acc[88]), "+f"(acc[89]), "+f"(acc[90]), "+f"(acc[91]),
        "+f"(acc[92]), "+f"(acc[93]), "+f"(acc[94]), "+f"(acc[95]), "+f"(acc[96]), "+f"(acc[97]),
        "+f"(acc[98]), "+f"(acc[99]), "+f"(acc[100]), "+f"(acc[101]), "+f"(acc[102]), "+f"(acc[103]),
        "+f"(acc[104]), "+f"(acc[105]), "+f"(acc[106]), "+f"(acc[107]), "+f"(acc[108]), "+f"(acc[109]),
        "+f"(acc[110]), "+f"(acc[111]), "+f"(acc[112]), "+f"(acc[113]), "+f"(acc[114]), "+f"(acc[115]),
        "+f"(acc[116]), "+f"(acc[117]), "+f"(acc[118]), "+f"(acc[119]), "+f"(acc[120]), "+f"(acc[121]),
        "+f"(acc[122]), "+f"(acc[123]), "+f"(acc[124]), "+f"(acc[125]), "+f"(acc[126]), "+f"(acc[127])
      : "l"(desc_a), "l"(desc_b), "r"(accumulate), "n"(TransposeB ? 1 : 0));
}

// Shared-memory matrix descriptor for an N-major (MN-major) B tile with 128-byte swizzle: each k row
// holds 64 consecutive n (128 bytes) of one 64-column atom, 8 k rows form a 1024-byte swizzle atom,
// groups of 8 k rows `k_group_bytes` apart and 64-column atoms `atom_bytes` apart.
__device__ __forceinline__ std::uint64_t swizzle128_n_major_descriptor(const void* tile,
                                                                       std::uint32_t atom_bytes,
                                                                       std::uint32_t k_group_bytes) {
  const std::uint64_t address = smem_address(tile);
  std::uint64_t descriptor = (address & 0x3FFFF) >> 4;
  descriptor |= static_cast<std::uint64_t>((atom_bytes >> 4) & 0x3FFF) << 16;     // leading byte offset
  descriptor |= static_cast<std::uint64_t>((k_group_bytes >> 4) & 0x3FFF) << 32;  // stride byte offset
  descriptor |= static_cast<std::uint64_t>(1) << 62;                              // 128-byte swizzle
  return descriptor;
}
#endif

}  // namespace twell::cuda
