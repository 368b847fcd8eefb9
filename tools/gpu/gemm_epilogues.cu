// cuBLASLt's epilogues for the input gradient through the GELU, timed alone: the plain GEMM, DGELU,
// and DGELU_BGRAD with an fp32 and a bf16 bias gradient (the best of the heuristic's eight
// candidates, 20 runs each; constant inputs), at the 1.3B and 124M models' fc2 shapes.
// Built on the development machine and run on the GPU machine:
//   nvcc -O2 -arch=sm_90 -o .devpack/gemm_epilogues tools/gpu/gemm_epilogues.cu -lcublasLt
//   (there) source tools/gpu/devpack_env.bash; .devpack/gemm_epilogues
#include <cublasLt.h>
#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <cstdio>
#include <vector>
// A failed call: -1 ms in the table.
#define CK(x) do { auto s_ = (x); if ((int)s_ != 0) { printf("ERR %s:%d %d\n", __FILE__, __LINE__, (int)s_); return -1.f; } } while (0)
cublasLtHandle_t h; void* ws; size_t wsb = 64 << 20;
float run(int m, int n, int k, cublasLtEpilogue_t epi, cudaDataType_t bias_type, bool acc, cudaDataType_t dt) {
  void *a, *b, *d, *aux, *bias;
  size_t es = dt == CUDA_R_32F ? 4 : 2;
  cudaMalloc(&a, (size_t)m * k * 2); cudaMalloc(&b, (size_t)k * n * 2); cudaMalloc(&d, (size_t)m * n * es);
  cudaMalloc(&aux, (size_t)m * n * 2); cudaMalloc(&bias, (size_t)(m > n ? m : n) * 4);
  cudaMemset(a, 0x3c, (size_t)m * k * 2); cudaMemset(b, 0x3c, (size_t)k * n * 2); cudaMemset(aux, 0x3c, (size_t)m * n * 2); cudaMemset(d, 0, (size_t)m*n*es);
  cublasLtMatmulDesc_t desc; CK(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  cublasOperation_t tn = CUBLAS_OP_N, tt = CUBLAS_OP_T;
  bool wgrad = epi == CUBLASLT_EPILOGUE_BGRADB || (acc && epi == CUBLASLT_EPILOGUE_DEFAULT);
  CK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &tn, sizeof tn));
  CK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, wgrad ? &tt : &tn, sizeof tn));
  CK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi));
  if (epi == CUBLASLT_EPILOGUE_DGELU_BGRAD || epi == CUBLASLT_EPILOGUE_BGRADB) {
    int32_t bt = bias_type; CK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bt, sizeof bt));
    CK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias));
  }
  if (epi == CUBLASLT_EPILOGUE_DGELU || epi == CUBLASLT_EPILOGUE_DGELU_BGRAD) {
    int64_t ld = m; CK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &ld, sizeof ld));
    int32_t at = CUDA_R_16BF; CK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_DATA_TYPE, &at, sizeof at));
    CK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &aux, sizeof aux));
  }
  cublasLtMatrixLayout_t la, lb, ld;
  CK(cublasLtMatrixLayoutCreate(&la, CUDA_R_16BF, m, k, m));
  if (wgrad) CK(cublasLtMatrixLayoutCreate(&lb, CUDA_R_16BF, n, k, n)); else CK(cublasLtMatrixLayoutCreate(&lb, CUDA_R_16BF, k, n, k));
  CK(cublasLtMatrixLayoutCreate(&ld, dt, m, n, m));
  cublasLtMatmulPreference_t pref; CK(cublasLtMatmulPreferenceCreate(&pref));
  CK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &wsb, sizeof wsb));
  cublasLtMatmulHeuristicResult_t r[8]; int found = 0;
  if (cublasLtMatmulAlgoGetHeuristic(h, desc, la, lb, ld, ld, pref, 8, r, &found) != 0 || !found) { printf("  no algorithm\n"); return -1.f; }
  float alpha = 1, beta = acc ? 1 : 0, best = 1e9;
  cudaEvent_t e0, e1; cudaEventCreate(&e0); cudaEventCreate(&e1);
  for (int i = 0; i < found; ++i) {
    if (cublasLtMatmul(h, desc, &alpha, a, la, b, lb, &beta, d, ld, d, ld, &r[i].algo, ws, wsb, 0) != 0) continue;
    cudaEventRecord(e0);
    for (int j = 0; j < 20; ++j) cublasLtMatmul(h, desc, &alpha, a, la, b, lb, &beta, d, ld, d, ld, &r[i].algo, ws, wsb, 0);
    cudaEventRecord(e1); cudaEventSynchronize(e1); float ms; cudaEventElapsedTime(&ms, e0, e1); ms /= 20;
    if (ms < best) best = ms;
  }
  cudaFree(a); cudaFree(b); cudaFree(d); cudaFree(aux); cudaFree(bias);
  cublasLtMatmulPreferenceDestroy(pref);
  cublasLtMatrixLayoutDestroy(la); cublasLtMatrixLayoutDestroy(lb); cublasLtMatrixLayoutDestroy(ld);
  cublasLtMatmulDescDestroy(desc);
  return best < 1e9f ? best : -1.f;  // no candidate ran
}
int main() {
  cublasLtCreate(&h); cudaMalloc(&ws, wsb);
  struct S { const char* name; int m, n, k; } shapes[] = {{"1.3B fc2 dgrad", 8192, 8192, 2048}, {"124M fc2 dgrad", 3072, 32768, 768}};
  for (auto s : shapes) {
    double fl = 2.0 * s.m * s.n * s.k;
    float t0 = run(s.m, s.n, s.k, CUBLASLT_EPILOGUE_DEFAULT, CUDA_R_32F, false, CUDA_R_16BF);
    float t1 = run(s.m, s.n, s.k, CUBLASLT_EPILOGUE_DGELU, CUDA_R_16BF, false, CUDA_R_16BF);
    float t2 = run(s.m, s.n, s.k, CUBLASLT_EPILOGUE_DGELU_BGRAD, CUDA_R_32F, false, CUDA_R_16BF);
    float t3 = run(s.m, s.n, s.k, CUBLASLT_EPILOGUE_DGELU_BGRAD, CUDA_R_16BF, false, CUDA_R_16BF);
    printf("%s: plain %.3f ms (%.0f TF/s)  DGELU %.3f  DGELU_BGRAD fp32 bias %.3f  bf16 bias %.3f\n", s.name, t0, fl / t0 / 1e9, t1, t2, t3);
  }
  return 0;
}
