/* build/native/msda: forward and backward over a directory of .npy files (CONTRACT.md).
 *
 * Exit status: 0 done; 2 bad arguments or bad input, with one line on stderr starting "msda:"
 * that names the file or flag; 1 any other failure (I/O, memory; crosscheck: a disagreement).
 * The CLI's parts are libmsdacli.a (mk/cli.mk): arguments (args.c), the case's files (cases.c),
 * the outputs (outputs.c), crosscheck --expect (crosscheck.c), messages and numbers; this file
 * runs a command on them. */
#define _POSIX_C_SOURCE 200809L
#include "args.h"
#include "cases.h"
#include "crosscheck.h"
#include "messages.h"
#include "msda.h"
#include "outputs.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef MSDA_VERSION
#error "MSDA_VERSION (package.json's version) is defined by mk/cli.mk"
#endif

static const char USAGE[] =
    "usage: msda forward    --in DIR --out DIR [options]\n"
    "       msda backward   --in DIR --out DIR [options]\n"
    "       msda crosscheck --in DIR --expect DIR [options]\n"
    "\n"
    "Multi-scale deformable attention on a case directory of NumPy .npy files (or an .npz of them,\n"
    "from np.savez or np.savez_compressed, in place of DIR).\n"
    "\n"
    "  --in DIR        reads value.npy (<f4), spatial_shapes.npy (<i8|<i4, (N_l, 2)),\n"
    "                  level_start_index.npy (<i8|<i4, (N_l,); optional, derived), sampling_locations.npy (<f4),\n"
    "                  attention_weights.npy (<f4, (B, N_q, N_h, N_l, N_p)) and, for backward,\n"
    "                  grad_output.npy (<f4, (B, N_q, N_h*C_h)); float inputs may also be <f2\n"
    "                  (float16) or 'bfloat16', widened exactly to float32\n"
    "  --out DIR       writes output.npy (forward) or grad_value.npy, grad_sampling_locations.npy,\n"
    "                  grad_attention_weights.npy (backward); created if missing\n"
    "  --value-layout BLNC|BNLC                   value is (B, L, N_h, C_h) or (B, N_h, L, C_h); default BLNC\n"
    "  --sampling-locations-layout BQHLP2|B2QHLP  (B, N_q, N_h, N_l, N_p, 2) or (B, 2, N_q, N_h, N_l, N_p);\n"
    "                                             default BQHLP2\n"
    "  --align-corners                            pixel centres at the ends of [0, 1]; default off\n"
    "  --padding-mode zeros|border                default zeros\n"
    "  --threads N                                default 1; results do not depend on it\n"
    "  --out-dtype float32|float16|bfloat16       the outputs rounded to float16 ('<f2' files) or to\n"
    "                                             bfloat16 (float32 files holding them); default float32\n"
    "  -h, --help                                 this text\n"
    "  --version                                  the package version\n"
    "\n"
    "crosscheck --expect DIR compares your kernel's dumps in DIR (output.npy, grad_value.npy,\n"
    "grad_sampling_locations.npy, grad_attention_weights.npy, whichever are there; <f4, <f2 or\n"
    "'bfloat16') with the float64 reference, each element against its own bound, exactly as the\n"
    "JS CLI does (docs/cli.md, For kernel authors):\n"
    "  --dtype float32|float16|bfloat16   the precision your kernel stores tensors in (default: the\n"
    "                                     files' own when all are <f2 or all 'bfloat16', else float32)\n"
    "  --rtol R --atol A                  instead: |yours - ours| <= A + R*|ours|\n"
    "  --top K                            list the K elements of each output that disagree most\n"
    "  --json                             one JSON document on stdout instead of the text\n"
    "crosscheck without --expect (the backends against each other) is the JS CLI's.\n"
    "\n"
    "Exit status: 0 done, 2 bad arguments or input (one line on stderr naming the file or flag),\n"
    "1 any other failure.\n";

static float *alloc_floats(int64_t n)
{
    return malloc((size_t)n * sizeof(float)); /* n > 0 and its byte size fits: validated */
}

/* forward or backward: the library on the case, the outputs written all or nothing. */
static int run(const options *o, case_data *c)
{
    msda_problem p;
    int code = derive_problem(o, c, &p);
    if (code) return code;
    code = prepare_out(o->out);
    if (!code)
        code = o->backward ? check_destinations(o->out, BACKWARD_OUTPUTS, 3, EXIT_BAD_INPUT)
                           : check_destinations(o->out, FORWARD_OUTPUTS, 1, EXIT_BAD_INPUT);
    if (code) return code;

    msda_error e;
    const int64_t value_n = msda_value_elements(&p), loc_n = msda_locations_elements(&p),
                  weights_n = msda_weights_elements(&p), out_n = msda_output_elements(&p);
    const int64_t out_shape[3] = {p.batch, p.num_queries, p.num_heads * p.channels};
    if (!o->backward) {
        float *output = alloc_floats(out_n);
        if (!output) return report(EXIT_OTHER, "out of memory for output (%lld floats)", (long long)out_n);
        if (msda_forward(&p, c->f32[F_VALUE], c->f32[F_LOCATIONS], c->f32[F_WEIGHTS], output, &e) != MSDA_OK) {
            code = report(EXIT_OTHER, "forward failed: %s: %s", msda_status_string(e.status), e.message);
        } else {
            const output_file files[] = {{FORWARD_OUTPUTS[0], 3, out_shape, output}};
            code = write_outputs(o->out, files, 1, o->out_dtype);
        }
        free(output);
        return code;
    }
    float *grad_value = alloc_floats(value_n), *grad_loc = alloc_floats(loc_n), *grad_weights = alloc_floats(weights_n);
    if (!grad_value || !grad_loc || !grad_weights) {
        code = report(EXIT_OTHER, "out of memory for the gradients (%lld floats)",
                      (long long)(value_n + loc_n + weights_n));
    } else if (msda_backward(&p, c->f32[F_GRAD_OUTPUT], c->f32[F_VALUE], c->f32[F_LOCATIONS], c->f32[F_WEIGHTS],
                             grad_value, grad_loc, grad_weights, &e) != MSDA_OK) {
        code = report(EXIT_OTHER, "backward failed: %s: %s", msda_status_string(e.status), e.message);
    } else {
        const output_file files[] = {
            {BACKWARD_OUTPUTS[0], 4, c->arr[F_VALUE].shape, grad_value},
            {BACKWARD_OUTPUTS[1], 6, c->arr[F_LOCATIONS].shape, grad_loc},
            {BACKWARD_OUTPUTS[2], 5, c->arr[F_WEIGHTS].shape, grad_weights},
        };
        code = write_outputs(o->out, files, 3, o->out_dtype);
    }
    free(grad_value);
    free(grad_loc);
    free(grad_weights);
    return code;
}

int main(int argc, char **argv)
{
    options o;
    int code = parse_args(argc, argv, &o);
    if (code < 0) {
        fputs(o.help ? USAGE : MSDA_VERSION "\n", stdout);
        return EXIT_OK;
    }
    if (code) return code;
    if (o.crosscheck) return run_crosscheck(&o);
    case_data c;
    memset(&c, 0, sizeof c);
    code = load_case(&o, &c);
    if (!code) code = run(&o, &c);
    case_free(&c);
    return code;
}
