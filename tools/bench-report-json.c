/* bench-report-json.c - a run as JSON (--json): the run's settings, every
 * variant with every sample, every check, the notes and the skips. */
#include "bench-report.h"

#include "json-writer.h"

static void write_variant(json_writer *json, const bench_variant *variant)
{
    unsigned sample;
    json_object_begin(json);
    json_key(json, "label");
    json_string(json, variant->spec.label);
    json_key(json, "role");
    json_string(json, bench_role_name(variant->spec.role));
    json_key(json, "ops_per_sample");
    json_uint(json, variant->iterations * variant->spec.ops_per_iteration);
    json_key(json, "median_ns");
    json_double(json, variant->median_ns);
    json_key(json, "min_ns");
    json_double(json, variant->min_ns);
    json_key(json, "max_ns");
    json_double(json, variant->max_ns);
    json_key(json, "p10_ns");
    json_double(json, variant->p10_ns);
    json_key(json, "p90_ns");
    json_double(json, variant->p90_ns);
    if (variant->spec.bytes_per_op != 0) {
        json_key(json, "bytes_per_op");
        json_uint(json, variant->spec.bytes_per_op);
        json_key(json, "median_gb_per_s");
        json_double(json, bench_gb_per_s(variant->spec.bytes_per_op,
                                         variant->median_ns));
    }
    if (variant->spec.threads > 0) {
        json_key(json, "threads");
        json_uint(json, variant->spec.threads);
        json_key(json, "median_ops_per_s");
        json_double(json, variant->median_ns > 0.0
                              ? 1e9 / variant->median_ns
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
    }
    return "?";
}

static void write_check(json_writer *json, const bench_scenario *scenario,
                        const bench_check *check)
{
    json_object_begin(json);
    json_key(json, "kind");
    json_string(json, check_kind_name(check->kind));
    json_key(json, "label");
    json_string(json, check->label);
    json_key(json, "a");
    json_string(json, scenario->variants[check->a].spec.label);
    if (check->b >= 0) {
        json_key(json, "b");
        json_string(json, scenario->variants[check->b].spec.label);
    }
    json_key(json, "value");
    json_double(json, check->value);
    if (check->has_target) {
        json_key(json, "limit");
        json_double(json, check->limit);
        json_key(json, "target");
        json_string(json, check->target);
        json_key(json, "result");
        json_string(json, bench_check_result(check));
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
    json_key(json, "name");
    json_string(json, scenario->name);
    json_key(json, "what");
    json_string(json, scenario->what);
    json_key(json, "samples");
    json_uint(json, scenario->samples);
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
    json_key(json, "ordinal");
    json_int(json, env->props.ordinal);
    json_key(json, "name");
    json_string(json, env->props.name);
    json_key(json, "pci_bus_id");
    json_string(json, env->props.pci_bus_id);
    json_key(json, "compute_capability");
    json_string(json, capability);
    json_object_end(json);
}

void bench_report_write_json(FILE *out, const bench_report_run *run)
{
    const bench_env *env = run->env;
    json_writer json;
    size_t index;

    json_writer_init(&json, out);
    json_object_begin(&json);
    json_key(&json, "tool");
    json_string(&json, "curd-bench");
    json_key(&json, "curd_version");
    json_string(&json, curd_version_string());
    json_key(&json, "driver_version");
    json_int(&json, env->driver_version);
    json_key(&json, "device");
    write_device(&json, env);
    json_key(&json, "mode");
    json_string(&json, env->quick ? "quick" : "default");
    json_key(&json, "samples");
    json_uint(&json, env->samples);
    json_key(&json, "samples_large");
    json_uint(&json, env->samples_large);
    json_key(&json, "sample_target_ns");
    json_uint(&json, env->sample_target_ns);
    json_key(&json, "seed");
    json_uint(&json, env->seed);
    json_key(&json, "ok");
    json_bool(&json, run->failure == NULL);
    json_key(&json, "error");
    if (run->failure != NULL)
        json_string(&json, run->failure);
    else
        json_null(&json);
    json_key(&json, "passes");
    json_uint(&json, run->passes);
    json_key(&json, "misses");
    json_uint(&json, run->misses);
    json_key(&json, "wall_s");
    json_double(&json, run->wall_s);
    json_key(&json, "skipped");
    json_array_begin(&json);
    for (index = 0; index < run->skip_count; index++) {
        json_object_begin(&json);
        json_key(&json, "name");
        json_string(&json, run->skips[index].name);
        json_key(&json, "reason");
        json_string(&json, run->skips[index].reason);
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
