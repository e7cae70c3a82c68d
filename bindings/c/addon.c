/* Node addon (N-API) exposing msda_forward / msda_backward on Float32Arrays, so Node tests and
 * the CLI can run the native library beside the wasm one through one JS API (bindings/native.js).
 *
 *   forward(desc, value, samplingLocations, attentionWeights, output)
 *   backward(desc, gradOutput, value, samplingLocations, attentionWeights,
 *            gradValue, gradSamplingLocations, gradAttentionWeights)
 *
 * An input (value, samplingLocations, attentionWeights, gradOutput) may also be a Uint16Array of
 * half-precision bits, float16 unless bit i of an optional argument after the tensors, halfMask,
 * is set for argument i (then bfloat16). Where the description's value_dtype is float16 or
 * bfloat16, value is those bits, read as they are (the kernels widen its rows as they read them);
 * every other half input is widened (msda_widen_half) one after another into scratch, a Float32Array after halfMask
 * that the caller keeps from call to call (bindings/node/addon.js), so that no call pays for
 * fresh pages.
 *
 * desc is the BigInt64Array problem description of bindings/c/problem_desc.h. Both return
 * null on success or { status, code, message } with the library's status and message. A wrong
 * argument type or a too-short array throws, so the library never reads or writes past an array. */
#include <node_api.h>

#include "msda.h"
#include "problem_desc.h"

#include <stdio.h>

/* The package version (package.json's, from mk/js.mk): bindings/native.js accepts an addon only
 * when it says the version of the JS that loads it. */
#ifndef MSDA_VERSION
#error "MSDA_VERSION must be defined (mk/js.mk passes package.json's version)"
#endif

#define MAX_ARGS 10

/* Throws a TypeError/RangeError and returns NULL so callers can `return fail(...)`. */
static napi_value fail(napi_env env, int range, const char *message)
{
    if (range) napi_throw_range_error(env, NULL, message);
    else napi_throw_type_error(env, NULL, message);
    return NULL;
}

static napi_value make_result(napi_env env, const msda_error *err)
{
    napi_value result, status, code, message;
    napi_create_object(env, &result);
    napi_create_int32(env, (int32_t)err->status, &status);
    napi_create_string_utf8(env, msda_status_string(err->status), NAPI_AUTO_LENGTH, &code);
    napi_create_string_utf8(env, err->message, NAPI_AUTO_LENGTH, &message);
    napi_set_named_property(env, result, "status", status);
    napi_set_named_property(env, result, "code", code);
    napi_set_named_property(env, result, "message", message);
    return result;
}

/* The data pointer and element count of a typed array of the given type, or NULL after throwing. */
static void *typed_array(napi_env env, napi_value v, napi_typedarray_type want, const char *name, size_t *length)
{
    bool is_typed = false;
    napi_is_typedarray(env, v, &is_typed);
    napi_typedarray_type type;
    void *data = NULL;
    if (is_typed) napi_get_typedarray_info(env, v, &type, length, &data, NULL, NULL);
    if (!is_typed || type != want) {
        char msg[160];
        snprintf(msg, sizeof msg, "%s must be a %s", name,
                 want == napi_bigint64_array ? "BigInt64Array" : "Float32Array");
        fail(env, 0, msg);
        return NULL;
    }
    /* A zero-length typed array may have no backing store; the library still wants a pointer. */
    static float empty;
    return data ? data : &empty;
}

static napi_value run(napi_env env, napi_callback_info info, int backward)
{
    static const char *forward_names[] = {"desc", "value", "samplingLocations", "attentionWeights", "output"};
    static const char *backward_names[] = {"desc", "gradOutput", "value", "samplingLocations", "attentionWeights",
                                           "gradValue", "gradSamplingLocations", "gradAttentionWeights"};
    const char **names = backward ? backward_names : forward_names;
    const size_t want = backward ? 8 : 5, inputs_end = backward ? 5 : 4;
    size_t argc = MAX_ARGS + 1;
    napi_value argv[MAX_ARGS + 1];
    napi_get_cb_info(env, info, &argc, argv, NULL, NULL);
    if (argc < want || argc > want + 2) {
        char msg[96];
        snprintf(msg, sizeof msg, "%s expects %zu arguments, got %zu", backward ? "backward" : "forward", want, argc);
        return fail(env, 0, msg);
    }
    uint32_t half_mask = 0;
    if (argc > want && napi_get_value_uint32(env, argv[want], &half_mask) != napi_ok)
        return fail(env, 0, "halfMask must be a number");
    float *scratch = NULL;
    size_t scratch_len = 0;
    if (argc == want + 2 && !(scratch = typed_array(env, argv[want + 1], napi_float32_array, "scratch", &scratch_len)))
        return NULL;
    size_t desc_count = 0;
    const int64_t *desc = typed_array(env, argv[0], napi_bigint64_array, names[0], &desc_count);
    if (!desc) return NULL;
    float *buf[MAX_ARGS];
    size_t len[MAX_ARGS];
    const uint16_t *bits[MAX_ARGS] = {NULL};
    for (size_t i = 1; i < want; i++) {
        napi_typedarray_type type = napi_float32_array;
        bool is_typed = false;
        napi_is_typedarray(env, argv[i], &is_typed);
        if (is_typed && i < inputs_end) napi_get_typedarray_info(env, argv[i], &type, NULL, NULL, NULL, NULL);
        if (type == napi_uint16_array) {
            bits[i] = typed_array(env, argv[i], napi_uint16_array, names[i], &len[i]);
            buf[i] = NULL;
            continue;
        }
        buf[i] = typed_array(env, argv[i], napi_float32_array, names[i], &len[i]);
        if (!buf[i]) return NULL;
    }

    msda_problem p;
    msda_error err = {MSDA_OK, {0}};
    msda_status st = msda_problem_from_desc(desc, (int64_t)desc_count, &p, &err);
    if (st == MSDA_OK) st = msda_validate(&p, &err);
    if (st != MSDA_OK) return make_result(env, &err);

    /* Every array must hold its tensor: the library trusts the sizes it is given. */
    const int64_t v = msda_value_elements(&p), l = msda_locations_elements(&p), w = msda_weights_elements(&p),
                  o = msda_output_elements(&p);
    const int64_t fwd_need[] = {0, v, l, w, o};
    const int64_t bwd_need[] = {0, o, v, l, w, v, l, w};
    const int64_t *need = backward ? bwd_need : fwd_need;
    for (size_t i = 1; i < want; i++) {
        if ((int64_t)len[i] < need[i]) {
            char msg[160];
            snprintf(msg, sizeof msg, "%s has %zu elements, expected %lld", names[i], len[i], (long long)need[i]);
            return fail(env, 1, msg);
        }
    }

    /* A half value_dtype: value goes to the kernels as it is, which widen its rows as they read
     * them; the other half inputs are widened into scratch, each its tensor's elements. */
    const size_t value_arg = backward ? 2 : 1;
    const int value_as_is = p.value_dtype != MSDA_FLOAT32;
    if (value_as_is && !bits[value_arg])
        return fail(env, 0, "value must be a Uint16Array: the problem description's value_dtype is half-precision");
    const void *value = value_as_is ? (const void *)bits[value_arg] : (const void *)buf[value_arg];
    int64_t scratch_need = 0;
    for (size_t i = 1; i < inputs_end; i++)
        if (bits[i] && !(i == value_arg && value_as_is)) scratch_need += need[i];
    if ((int64_t)scratch_len < scratch_need) {
        char msg[160];
        snprintf(msg, sizeof msg, "scratch has %zu elements, expected %lld (the half-precision inputs widened)",
                 scratch_len, (long long)scratch_need);
        return fail(env, 1, msg);
    }
    for (size_t i = 1, at = 0; i < inputs_end; i++) {
        if (!bits[i] || (i == value_arg && value_as_is)) continue;
        buf[i] = scratch + at;
        msda_widen_half(bits[i], buf[i], need[i], (int)(half_mask >> i & 1));
        at += (size_t)need[i];
    }
    if (backward)
        st = msda_backward(&p, buf[1], value_as_is ? value : buf[2], buf[3], buf[4], buf[5], buf[6], buf[7], &err);
    else
        st = msda_forward(&p, value_as_is ? value : buf[1], buf[2], buf[3], buf[4], &err);
    if (st != MSDA_OK) return make_result(env, &err);
    napi_value null_value;
    napi_get_null(env, &null_value);
    return null_value;
}

/* isa() -> the instruction set the kernels run on (msda_isa), or null when MSDA_ISA names one
 * this CPU lacks. */
static napi_value isa(napi_env env, napi_callback_info info)
{
    (void)info;
    const char *name = msda_isa();
    napi_value result;
    if (name)
        napi_create_string_utf8(env, name, NAPI_AUTO_LENGTH, &result);
    else
        napi_get_null(env, &result);
    return result;
}

/* isaList() -> this CPU's instruction sets, separated by spaces (msda_isa_list): what MSDA_ISA
 * may name, for the message when it names another. */
static napi_value isa_list(napi_env env, napi_callback_info info)
{
    (void)info;
    napi_value result;
    napi_create_string_utf8(env, msda_isa_list(), NAPI_AUTO_LENGTH, &result);
    return result;
}

/* fastDtype(d) -> msda_fast_dtype(d) as a boolean: the kernels read value rows of msda_dtype d as
 * they are (core/half.js). */
static napi_value fast_dtype(napi_env env, napi_callback_info info)
{
    size_t argc = 1;
    napi_value argv[1];
    int32_t dtype = -1;
    napi_get_cb_info(env, info, &argc, argv, NULL, NULL);
    if (argc < 1 || napi_get_value_int32(env, argv[0], &dtype) != napi_ok)
        return fail(env, 0, "fastDtype expects a number (msda_dtype)");
    napi_value result;
    napi_get_boolean(env, dtype >= 0 && msda_fast_dtype((msda_dtype)dtype), &result);
    return result;
}

static napi_value forward(napi_env env, napi_callback_info info) { return run(env, info, 0); }
static napi_value backward(napi_env env, napi_callback_info info) { return run(env, info, 1); }

static napi_value init(napi_env env, napi_value exports)
{
    napi_value version;
    napi_create_string_utf8(env, MSDA_VERSION, NAPI_AUTO_LENGTH, &version);
    napi_property_descriptor props[] = {
        {"version", NULL, NULL, NULL, NULL, version, napi_enumerable, NULL},
        {"forward", NULL, forward, NULL, NULL, NULL, napi_default, NULL},
        {"backward", NULL, backward, NULL, NULL, NULL, napi_default, NULL},
        {"isa", NULL, isa, NULL, NULL, NULL, napi_default, NULL},
        {"isaList", NULL, isa_list, NULL, NULL, NULL, napi_default, NULL},
        {"fastDtype", NULL, fast_dtype, NULL, NULL, NULL, napi_default, NULL},
    };
    napi_define_properties(env, exports, sizeof props / sizeof props[0], props);
    return exports;
}

/* NAPI_MODULE defines these two exported functions; declaring them keeps -Wmissing-prototypes on. */
NAPI_MODULE_EXPORT int32_t NODE_API_MODULE_GET_API_VERSION(void);
NAPI_MODULE_EXPORT napi_value NAPI_MODULE_INITIALIZER(napi_env env, napi_value exports);
NAPI_MODULE(NODE_GYP_MODULE_NAME, init)
