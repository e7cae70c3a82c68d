// The GPU check's CUDA anchor (gpucheck.sh), for the WebGPU backend's goal "within 2x of a CUDA
// kernel on the same GPU": the original Deformable-DETR CUDA design, written anew (not copied),
// on the bench's exact inputs (cases.h = tests/bench/cases.js, bit for bit), timed with CUDA events.
//   forward  (im2col): a thread per (b, q, h, c), blocks of 256; per sample the bilinear
//            coordinates 32 times over (once per channel lane), <= 4 corner loads, one FMA chain;
//   backward (col2im, channels = 32: the kernel the original picks, ..._shm_blocksize_aware_reduce_v1):
//            blocks of C threads = one (b, q, h); per sample the bilinear backward, one float
//            atomicAdd per in-bounds corner per channel into grad_value (zeroed first, as the
//            original's at::zeros_like), and the location / weight gradients summed over the 32
//            channel lanes in shared memory, serially by thread 0, between two __syncthreads.
// Also: a device-to-device copy (achieved bandwidth), and a float64 CPU check of the outputs.
//
//   nvcc -O3 -std=c++17 -gencode arch=compute_90,code=sm_90 -gencode arch=compute_80,code=compute_80 \
//        -o cuda_anchor tests/bench/gpucheck/cuda_anchor.cu && ./cuda_anchor [encoder decoder ...] [--reps 20] [--json out.json]
#include <cuda_runtime.h>
#include <algorithm>
#include <cstdio>
#include <vector>
#include "cases.h"

#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); std::exit(1); } } while (0)

struct Dims { int B, Q, H, C, NL, P, L; };
__constant__ int c_lh[8], c_lw[8], c_start[8];   // the levels (the original reads them from global memory)

__device__ __forceinline__ float corner(const float *v, int y, int x, int Hl, int Wl, int rowStride) {
  return (y >= 0 && x >= 0 && y < Hl && x < Wl) ? v[(size_t)(y * Wl + x) * rowStride] : 0.f;
}

__global__ void fwd_kernel(Dims d, const float *__restrict__ value, const float *__restrict__ locs,
                           const float *__restrict__ attn, float *__restrict__ out) {
  const long n = (long)d.B * d.Q * d.H * d.C;
  for (long idx = blockIdx.x * (long)blockDim.x + threadIdx.x; idx < n; idx += (long)gridDim.x * blockDim.x) {
    int c = idx % d.C; long t = idx / d.C; int h = t % d.H; t /= d.H; int q = t % d.Q; int b = t / d.Q;
    const int rs = d.H * d.C;   // a pixel's stride in value (B, L, H, C)
    long w = (((long)b * d.Q + q) * d.H + h) * d.NL * d.P;
    float acc = 0.f;
    for (int l = 0; l < d.NL; l++) {
      const float *v = value + ((size_t)b * d.L + c_start[l]) * rs + h * d.C + c;
      const int Hl = c_lh[l], Wl = c_lw[l];
      for (int p = 0; p < d.P; p++, w++) {
        const float x = locs[2 * w], y = locs[2 * w + 1], a = attn[w];
        const float him = y * Hl - 0.5f, wim = x * Wl - 0.5f;
        if (him > -1 && wim > -1 && him < Hl && wim < Wl) {
          const int y0 = floorf(him), x0 = floorf(wim);
          const float ly = him - y0, lx = wim - x0, hy = 1 - ly, hx = 1 - lx;
          const float s = hy * hx * corner(v, y0, x0, Hl, Wl, rs) + hy * lx * corner(v, y0, x0 + 1, Hl, Wl, rs)
                        + ly * hx * corner(v, y0 + 1, x0, Hl, Wl, rs) + ly * lx * corner(v, y0 + 1, x0 + 1, Hl, Wl, rs);
          acc += a * s;
        }
      }
    }
    out[idx] = acc;
  }
}

template <int BS>
__global__ void bwd_kernel(Dims d, const float *__restrict__ gout, const float *__restrict__ value,
                           const float *__restrict__ locs, const float *__restrict__ attn,
                           float *gvalue, float *__restrict__ gloc, float *__restrict__ gattn) {
  __shared__ float cl[2 * BS];
  __shared__ float ca[BS];
  const long n = (long)d.B * d.Q * d.H * d.C;
  for (long idx = blockIdx.x * (long)blockDim.x + threadIdx.x; idx < n; idx += (long)gridDim.x * blockDim.x) {
    const int tid = threadIdx.x;
    int c = idx % d.C; long t = idx / d.C; int h = t % d.H; t /= d.H; int q = t % d.Q; int b = t / d.Q;
    const int rs = d.H * d.C;
    const float tg = gout[idx];
    long w = (((long)b * d.Q + q) * d.H + h) * d.NL * d.P;
    for (int l = 0; l < d.NL; l++) {
      const size_t off = ((size_t)b * d.L + c_start[l]) * rs + h * d.C + c;
      const float *v = value + off;
      float *gv = gvalue + off;
      const int Hl = c_lh[l], Wl = c_lw[l];
      for (int p = 0; p < d.P; p++, w++) {
        const float x = locs[2 * w], y = locs[2 * w + 1], a = attn[w];
        const float him = y * Hl - 0.5f, wim = x * Wl - 0.5f;
        cl[2 * tid] = 0.f; cl[2 * tid + 1] = 0.f; ca[tid] = 0.f;
        if (him > -1 && wim > -1 && him < Hl && wim < Wl) {
          const int y0 = floorf(him), x0 = floorf(wim), y1 = y0 + 1, x1 = x0 + 1;
          const float ly = him - y0, lx = wim - x0, hy = 1 - ly, hx = 1 - lx;
          const float tga = tg * a;
          float gh = 0.f, gw = 0.f, val = 0.f;
          if (y0 >= 0 && x0 >= 0) { const size_t o = (size_t)(y0 * Wl + x0) * rs; const float u = v[o]; gh -= hx * u; gw -= hy * u; val += hy * hx * u; atomicAdd(gv + o, hy * hx * tga); }
          if (y0 >= 0 && x1 < Wl) { const size_t o = (size_t)(y0 * Wl + x1) * rs; const float u = v[o]; gh -= lx * u; gw += hy * u; val += hy * lx * u; atomicAdd(gv + o, hy * lx * tga); }
          if (y1 < Hl && x0 >= 0) { const size_t o = (size_t)(y1 * Wl + x0) * rs; const float u = v[o]; gh += hx * u; gw -= ly * u; val += ly * hx * u; atomicAdd(gv + o, ly * hx * tga); }
          if (y1 < Hl && x1 < Wl) { const size_t o = (size_t)(y1 * Wl + x1) * rs; const float u = v[o]; gh += lx * u; gw += ly * u; val += ly * lx * u; atomicAdd(gv + o, ly * lx * tga); }
          ca[tid] = tg * val;
          cl[2 * tid] = Wl * gw * tga;
          cl[2 * tid + 1] = Hl * gh * tga;
        }
        __syncthreads();
        if (tid == 0) {
          float sx = cl[0], sy = cl[1], sa = ca[0];
          for (int i = 1; i < BS; i++) { sx += cl[2 * i]; sy += cl[2 * i + 1]; sa += ca[i]; }
          gloc[2 * w] = sx; gloc[2 * w + 1] = sy; gattn[w] = sa;
        }
        __syncthreads();
      }
    }
  }
}

// float64 reference of one (b, q, h): output row, location and weight gradients; grad_value whole.
static void cpu_reference(const Case &cs, std::vector<double> &out, std::vector<double> &gval, std::vector<double> &gloc, std::vector<double> &gattn) {
  const int B = cs.B, Q = cs.Q, H = cs.H, C = cs.C, NL = cs.NL, P = cs.P, L = cs.L, rs = H * C;
  out.assign((size_t)B * Q * H * C, 0); gval.assign((size_t)B * L * H * C, 0);
  gloc.assign(cs.locs.size(), 0); gattn.assign(cs.weights.size(), 0);
  for (int b = 0; b < B; b++) for (int q = 0; q < Q; q++) for (int h = 0; h < H; h++) for (int l = 0; l < NL; l++) for (int p = 0; p < P; p++) {
    const size_t w = ((((size_t)b * Q + q) * H + h) * NL + l) * P + p;
    const int Hl = cs.lh[l], Wl = cs.lw[l];
    const double x = cs.locs[2 * w], y = cs.locs[2 * w + 1], a = cs.weights[w];
    const double him = y * Hl - 0.5, wim = x * Wl - 0.5;
    if (!(him > -1 && wim > -1 && him < Hl && wim < Wl)) continue;
    const int y0 = (int)std::floor(him), x0 = (int)std::floor(wim);
    const double ly = him - y0, lx = wim - x0, wk[4] = {(1 - ly) * (1 - lx), (1 - ly) * lx, ly * (1 - lx), ly * lx};
    double gx = 0, gy = 0, ga = 0;
    for (int k = 0; k < 4; k++) {
      const int yi = y0 + (k >> 1), xi = x0 + (k & 1);
      if (yi < 0 || xi < 0 || yi >= Hl || xi >= Wl) continue;
      const size_t base = ((size_t)b * L + cs.start[l] + yi * Wl + xi) * rs + h * C;
      const double dwx = (k & 1 ? 1 : -1) * (k >> 1 ? ly : 1 - ly), dwy = (k >> 1 ? 1 : -1) * (k & 1 ? lx : 1 - lx);
      for (int c = 0; c < C; c++) {
        const double v = cs.value[base + c], g = cs.gout[(((size_t)b * Q + q) * H + h) * C + c];
        out[(((size_t)b * Q + q) * H + h) * C + c] += a * wk[k] * v;
        gval[base + c] += a * wk[k] * g;
        ga += wk[k] * v * g; gx += a * dwx * Wl * v * g; gy += a * dwy * Hl * v * g;
      }
    }
    gloc[2 * w] = gx; gloc[2 * w + 1] = gy; gattn[w] = ga;
  }
}

static double rel_err(const std::vector<float> &got, const std::vector<double> &want) {
  double num = 0, den = 0;
  for (size_t i = 0; i < want.size(); i++) { const double d = got[i] - want[i]; num += d * d; den += want[i] * want[i]; }
  return std::sqrt(num / (den > 0 ? den : 1));
}

int main(int argc, char **argv) {
  std::vector<std::string> names;
  int reps = 20;
  const char *json = nullptr;
  for (int i = 1; i < argc; i++) {
    std::string a = argv[i];
    if (a == "--reps" && i + 1 < argc) reps = std::atoi(argv[++i]);
    else if (a == "--json" && i + 1 < argc) json = argv[++i];
    else names.push_back(a);
  }
  if (names.empty()) names = {"encoder", "decoder"};
  cudaDeviceProp prop; CK(cudaGetDeviceProperties(&prop, 0));
  std::printf("device: %s, %d SMs, L2 %d MB\n", prop.name, prop.multiProcessorCount, prop.l2CacheSize >> 20);
  cudaEvent_t e0, e1; CK(cudaEventCreate(&e0)); CK(cudaEventCreate(&e1));
  auto timeit = [&](auto &&fn) {
    for (int i = 0; i < 3; i++) fn();
    std::vector<float> ms;
    for (int r = 0; r < reps; r++) { CK(cudaEventRecord(e0)); fn(); CK(cudaEventRecord(e1)); CK(cudaEventSynchronize(e1)); float t; CK(cudaEventElapsedTime(&t, e0, e1)); ms.push_back(t); }
    CK(cudaGetLastError());
    std::sort(ms.begin(), ms.end());
    return ms[ms.size() / 2];
  };
  { // achieved bandwidth: a 1 GiB device-to-device copy, bytes read + written
    size_t n = 1ull << 30; void *a, *b; CK(cudaMalloc(&a, n)); CK(cudaMalloc(&b, n)); CK(cudaMemset(a, 1, n));
    float ms = timeit([&] { CK(cudaMemcpyAsync(b, a, n, cudaMemcpyDeviceToDevice)); });
    std::printf("device-to-device copy: %.0f GB/s (read + write)\n", 2.0 * n / ms / 1e6);
    CK(cudaFree(a)); CK(cudaFree(b));
  }
  FILE *js = json ? std::fopen(json, "w") : nullptr;
  if (js) std::fprintf(js, "{\"device\": \"%s\", \"cases\": [", prop.name);
  std::printf("| case | samples | fwd ms | bwd ms (kernel) | bwd ms (zero grad_value + kernel) | rel. error fwd / grad_value / grad_loc / grad_attn (vs float64) |\n|---|---|---|---|---|---|\n");
  for (size_t ci = 0; ci < names.size(); ci++) {
    Case cs = make_case(names[ci]);
    Dims d{cs.B, cs.Q, cs.H, cs.C, cs.NL, cs.P, cs.L};
    if (cs.C != 32 || cs.NL > 8) { std::fprintf(stderr, "this anchor is written for 32 channels\n"); return 1; }
    CK(cudaMemcpyToSymbol(c_lh, cs.lh.data(), 4 * cs.NL)); CK(cudaMemcpyToSymbol(c_lw, cs.lw.data(), 4 * cs.NL)); CK(cudaMemcpyToSymbol(c_start, cs.start.data(), 4 * cs.NL));
    auto up = [&](const std::vector<float> &x) { float *p; CK(cudaMalloc(&p, 4 * x.size())); CK(cudaMemcpy(p, x.data(), 4 * x.size(), cudaMemcpyHostToDevice)); return p; };
    float *value = up(cs.value), *locs = up(cs.locs), *attn = up(cs.weights), *gout = up(cs.gout);
    float *out, *gval, *gloc, *gattn;
    const size_t nOut = cs.gout.size();
    CK(cudaMalloc(&out, 4 * nOut)); CK(cudaMalloc(&gval, 4 * cs.value.size())); CK(cudaMalloc(&gloc, 4 * cs.locs.size())); CK(cudaMalloc(&gattn, 4 * cs.weights.size()));
    const long n = (long)nOut;
    const int fb = (int)((n + 255) / 256), bb = (int)((n + 31) / 32);
    const float tf = timeit([&] { fwd_kernel<<<fb, 256>>>(d, value, locs, attn, out); });
    const float tb = timeit([&] { bwd_kernel<32><<<bb, 32>>>(d, gout, value, locs, attn, gval, gloc, gattn); });
    const float tbz = timeit([&] { CK(cudaMemsetAsync(gval, 0, 4 * cs.value.size())); bwd_kernel<32><<<bb, 32>>>(d, gout, value, locs, attn, gval, gloc, gattn); });
    // one clean run for the check
    CK(cudaMemset(gval, 0, 4 * cs.value.size()));
    fwd_kernel<<<fb, 256>>>(d, value, locs, attn, out);
    bwd_kernel<32><<<bb, 32>>>(d, gout, value, locs, attn, gval, gloc, gattn);
    CK(cudaDeviceSynchronize());
    auto down = [&](float *p, size_t k) { std::vector<float> x(k); CK(cudaMemcpy(x.data(), p, 4 * k, cudaMemcpyDeviceToHost)); return x; };
    std::vector<double> rOut, rGv, rGl, rGa;
    cpu_reference(cs, rOut, rGv, rGl, rGa);
    const double e1_ = rel_err(down(out, nOut), rOut), e2 = rel_err(down(gval, cs.value.size()), rGv), e3 = rel_err(down(gloc, cs.locs.size()), rGl), e4 = rel_err(down(gattn, cs.weights.size()), rGa);
    const long S = (long)cs.B * cs.Q * cs.H * cs.NL * cs.P;
    std::printf("| %s | %ld | %.3f | %.3f | %.3f | %.1e / %.1e / %.1e / %.1e |\n", cs.name.c_str(), S, tf, tb, tbz, e1_, e2, e3, e4);
    if (js) std::fprintf(js, "%s{\"case\": \"%s\", \"samples\": %ld, \"fwd_ms\": %.4f, \"bwd_kernel_ms\": %.4f, \"bwd_ms\": %.4f, \"rel_err\": [%.3e, %.3e, %.3e, %.3e]}", ci ? ", " : "", cs.name.c_str(), S, tf, tb, tbz, e1_, e2, e3, e4);
    for (float *p : {value, locs, attn, gout, out, gval, gloc, gattn}) CK(cudaFree(p));
  }
  if (js) { std::fprintf(js, "]}\n"); std::fclose(js); }
  return 0;
}
