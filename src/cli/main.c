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
#include "texts.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef MSDA_VERSION
#error "MSDA_VERSION (package.json's version) is defined by mk/cli.mk"
#endif

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
    /* an MSDA_ISA naming no instruction set of this CPU would fail the call: bad input, named */
    if (!msda_isa()) return report(EXIT_BAD_INPUT, TEXT_BAD_ISA, getenv("MSDA_ISA"), msda_isa_list());
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
        if (!output) return report(EXIT_OTHER, TEXT_OUT_OF_MEMORY_FOR, "output", (long long)out_n);
        if (msda_forward(&p, c->f32[F_VALUE], c->f32[F_LOCATIONS], c->f32[F_WEIGHTS], output, &e) != MSDA_OK) {
            code = report(EXIT_OTHER, TEXT_OP_FAILED, "forward", msda_status_string(e.status), e.message);
        } else {
            const output_file files[] = {{FORWARD_OUTPUTS[0], 3, out_shape, output}};
            code = write_outputs(o->out, files, 1, o->out_dtype);
        }
        free(output);
        return code;
    }
    float *grad_value = alloc_floats(value_n), *grad_loc = alloc_floats(loc_n), *grad_weights = alloc_floats(weights_n);
    if (!grad_value || !grad_loc || !grad_weights) {
        code = report(EXIT_OTHER, TEXT_OUT_OF_MEMORY_FOR, "the gradients", (long long)(value_n + loc_n + weights_n));
    } else if (msda_backward(&p, c->f32[F_GRAD_OUTPUT], c->f32[F_VALUE], c->f32[F_LOCATIONS], c->f32[F_WEIGHTS],
                             grad_value, grad_loc, grad_weights, &e) != MSDA_OK) {
        code = report(EXIT_OTHER, TEXT_OP_FAILED, "backward", msda_status_string(e.status), e.message);
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
        fputs(o.help ? TEXT_USAGE : MSDA_VERSION "\n", stdout);
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
