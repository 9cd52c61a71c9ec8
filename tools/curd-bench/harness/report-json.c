/* report-json.c - a run as JSON (--json): the run's settings, every
 * variant with every sample, every check, the notes and the skips. */
#include "harness/report-json.h"

#include "json-writer.h"

static void write_variant(json_writer *json, const bench_variant *variant)
{
    unsigned sample;
    json_object_begin(json);
    json_member_string(json, "label", variant->label);
    json_member_string(json, "role", bench_role_name(variant->spec.role));
    json_member_uint(json, "ops_per_sample",
                     variant->iterations * variant->spec.ops_per_iteration);
    json_member_double(json, "median_ns", variant->median_ns);
    json_member_double(json, "min_ns", variant->min_ns);
    json_member_double(json, "max_ns", variant->max_ns);
    json_member_double(json, "p10_ns", variant->p10_ns);
    json_member_double(json, "p90_ns", variant->p90_ns);
    if (variant->spec.bytes_per_op != 0) {
        json_member_uint(json, "bytes_per_op", variant->spec.bytes_per_op);
        json_member_double(
            json, "median_gb_per_s",
            bench_gb_per_s(variant->spec.bytes_per_op, variant->median_ns));
    }
    if (variant->spec.threads > 0) {
        json_member_uint(json, "threads", variant->spec.threads);
        json_member_double(json, "median_ops_per_s",
                           variant->median_ns > 0.0 ? 1e9 / variant->median_ns
                                                    : 0.0);
    }
    json_key(json, "samples_ns");
    json_array_begin(json);
    for (sample = 0; sample < variant->sample_count; sample++)
        json_double(json, variant->sample_ns[sample]);
    json_array_end(json);
    json_object_end(json);
}

static const char *check_kind_name(bench_check_kind kind)
{
    switch (kind) {
    case BENCH_CHECK_RATIO:
        return "ratio";
    case BENCH_CHECK_MEDIAN_NS:
        return "median_ns";
    case BENCH_CHECK_SPEEDUP:
        return "speedup";
    case BENCH_CHECK_EXTRA_NS:
        return "extra_ns";
    }
    return "?";
}

static void write_check(json_writer *json, const bench_scenario *scenario,
                        const bench_check *check)
{
    json_object_begin(json);
    json_member_string(json, "kind", check_kind_name(check->kind));
    json_member_string(json, "label", check->label);
    json_member_string(json, "a", scenario->variants[check->a].label);
    if (check->b >= 0) {
        json_member_string(json, "b", scenario->variants[check->b].label);
    }
    json_member_double(json, "value", check->value);
    if (check->has_target) {
        json_member_double(json, "limit", check->limit);
        json_member_string(json, "target", check->target);
        json_member_string(json, "result", bench_check_result(check));
    } else {
        json_key(json, "result");
        json_null(json);
    }
    json_object_end(json);
}

static void write_scenario(json_writer *json, const bench_scenario *scenario)
{
    unsigned index;
    json_object_begin(json);
    json_member_string(json, "name", scenario->name);
    json_member_string(json, "what", scenario->what);
    json_member_uint(json, "samples", scenario->samples);
    json_key(json, "variants");
    json_array_begin(json);
    for (index = 0; index < scenario->variant_count; index++)
        write_variant(json, &scenario->variants[index]);
    json_array_end(json);
    json_key(json, "checks");
    json_array_begin(json);
    for (index = 0; index < scenario->check_count; index++)
        write_check(json, scenario, &scenario->checks[index]);
    json_array_end(json);
    json_key(json, "notes");
    json_array_begin(json);
    for (index = 0; index < scenario->note_count; index++)
        json_string(json, scenario->notes[index]);
    json_array_end(json);
    json_object_end(json);
}

static void write_device(json_writer *json, const bench_env *env)
{
    char capability[16];
    snprintf(capability, sizeof capability, "%d.%d",
             env->props.compute_capability_major,
             env->props.compute_capability_minor);
    json_object_begin(json);
    json_member_int(json, "ordinal", env->props.ordinal);
    json_member_string(json, "name", env->props.name);
    json_member_string(json, "pci_bus_id", env->props.pci_bus_id);
    json_member_string(json, "compute_capability", capability);
    json_object_end(json);
}

void bench_report_write_json(FILE *out, const bench_report_run *run)
{
    const bench_env *env = run->env;
    json_writer json;
    size_t index;

    json_writer_init(&json, out);
    json_object_begin(&json);
    json_member_string(&json, "tool", "curd-bench");
    json_member_string(&json, "curd_version", curd_version_string());
    json_member_int(&json, "driver_version", env->driver_version);
    json_key(&json, "device");
    write_device(&json, env);
    json_member_string(&json, "mode", env->quick ? "quick" : "default");
    json_member_uint(&json, "samples", env->samples);
    json_member_uint(&json, "samples_large", env->samples_large);
    json_member_uint(&json, "sample_target_ns", env->sample_target_ns);
    json_member_uint(&json, "seed", env->seed);
    json_member_bool(&json, "ok", run->failure == NULL);
    json_key(&json, "error");
    if (run->failure != NULL)
        json_string(&json, run->failure);
    else
        json_null(&json);
    json_member_uint(&json, "passes", run->passes);
    json_member_uint(&json, "misses", run->misses);
    json_member_double(&json, "wall_s", run->wall_s);
    json_key(&json, "skipped");
    json_array_begin(&json);
    for (index = 0; index < run->skip_count; index++) {
        json_object_begin(&json);
        json_member_string(&json, "name", run->skips[index].name);
        json_member_string(&json, "reason", run->skips[index].reason);
        json_object_end(&json);
    }
    json_array_end(&json);
    json_key(&json, "scenarios");
    json_array_begin(&json);
    for (index = 0; index < run->scenario_count; index++)
        write_scenario(&json, run->scenarios[index]);
    json_array_end(&json);
    json_object_end(&json);
    fputc('\n', out);
}
