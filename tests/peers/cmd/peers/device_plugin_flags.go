package main

// The command-line flags of NVIDIA's device plugin and GPU feature discovery, as their main
// packages declare them (k8s-device-plugin v0.19.3, cmd/nvidia-device-plugin/main.go and
// cmd/gpu-feature-discovery/main.go). api/config/v1's NewConfig takes its defaults from these
// flags, and a main package cannot be imported, so they are restated here;
// `device-plugin-flags --source FILE` holds each table against NVIDIA's own declaration.

import (
	"errors"
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"time"

	spec "github.com/NVIDIA/k8s-device-plugin/api/config/v1"
	cli "github.com/urfave/cli/v2"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

type flagKind string

const (
	stringFlag      flagKind = "StringFlag"
	boolFlag        flagKind = "BoolFlag"
	stringSliceFlag flagKind = "StringSliceFlag"
	intSliceFlag    flagKind = "IntSliceFlag"
	durationFlag    flagKind = "GenericFlag" // spec.DurationValue
)

// peerFlag is one flag: its name, aliases, environment variables and default.
type peerFlag struct {
	Kind    flagKind `json:"kind"`
	Name    string   `json:"name"`
	Aliases []string `json:"aliases,omitempty"`
	EnvVars []string `json:"env_vars,omitempty"`
	// The default as a value: string, bool, []string, time.Duration, or nil for none.
	Value any `json:"value,omitempty"`
}

var devicePluginFlags = []peerFlag{
	{stringFlag, "mig-strategy", nil, []string{"MIG_STRATEGY"}, spec.MigStrategyNone},
	{boolFlag, "fail-on-init-error", nil, []string{"FAIL_ON_INIT_ERROR"}, true},
	{stringFlag, "driver-root", []string{"nvidia-driver-root"}, []string{"NVIDIA_DRIVER_ROOT"}, "/"},
	{stringFlag, "dev-root", []string{"nvidia-dev-root"}, []string{"NVIDIA_DEV_ROOT"}, nil},
	{boolFlag, "pass-device-specs", nil, []string{"PASS_DEVICE_SPECS"}, false},
	{stringSliceFlag, "device-list-strategy", nil, []string{"DEVICE_LIST_STRATEGY"}, []string{spec.DeviceListStrategyEnvVar}},
	{stringFlag, "device-id-strategy", nil, []string{"DEVICE_ID_STRATEGY"}, spec.DeviceIDStrategyUUID},
	{boolFlag, "gdrcopy-enabled", nil, []string{"GDRCOPY_ENABLED"}, nil},
	{boolFlag, "gds-enabled", nil, []string{"GDS_ENABLED"}, nil},
	{boolFlag, "mofed-enabled", nil, []string{"MOFED_ENABLED"}, nil},
	{stringFlag, "cdi-annotation-prefix", nil, []string{"CDI_ANNOTATION_PREFIX"}, spec.DefaultCDIAnnotationPrefix},
	{stringFlag, "nvidia-cdi-hook-path", []string{"nvidia-ctk-path"}, []string{"NVIDIA_CDI_HOOK_PATH", "NVIDIA_CTK_PATH"}, spec.DefaultNvidiaCTKPath},
	{stringFlag, "driver-root-ctr-path", []string{"container-driver-root"}, []string{"DRIVER_ROOT_CTR_PATH", "CONTAINER_DRIVER_ROOT"}, spec.DefaultContainerDriverRoot},
	{stringFlag, "mps-root", nil, []string{"MPS_ROOT"}, nil},
	{stringFlag, "device-discovery-strategy", nil, []string{"DEVICE_DISCOVERY_STRATEGY"}, "auto"},
	{intSliceFlag, "imex-channel-ids", nil, []string{"IMEX_CHANNEL_IDS"}, nil},
	{boolFlag, "imex-required", nil, []string{"IMEX_REQUIRED"}, nil},
	{stringFlag, "kubelet-socket", nil, []string{"KUBELET_SOCKET"}, pluginapi.KubeletSocket},
	{stringFlag, "config-file", nil, []string{"CONFIG_FILE"}, nil},
	{stringSliceFlag, "cdi-feature-flags", nil, []string{"CDI_FEATURE_FLAGS"}, nil},
}

// GFD's own flags; its kube-client and node flags (internal/flags) set nothing in the config.
var gfdFlags = []peerFlag{
	{stringFlag, "mig-strategy", nil, []string{"GFD_MIG_STRATEGY", "MIG_STRATEGY"}, spec.MigStrategyNone},
	{boolFlag, "fail-on-init-error", nil, []string{"GFD_FAIL_ON_INIT_ERROR", "FAIL_ON_INIT_ERROR"}, true},
	{boolFlag, "oneshot", nil, []string{"GFD_ONESHOT"}, false},
	{boolFlag, "no-timestamp", nil, []string{"GFD_NO_TIMESTAMP"}, false},
	{durationFlag, "sleep-interval", nil, []string{"GFD_SLEEP_INTERVAL"}, 60 * time.Second},
	{stringFlag, "output-file", []string{"output", "o"}, []string{"GFD_OUTPUT_FILE"}, "/etc/kubernetes/node-feature-discovery/features.d/gfd"},
	{stringFlag, "machine-type-file", nil, []string{"GFD_MACHINE_TYPE_FILE"}, "/sys/class/dmi/id/product_name"},
	{stringFlag, "config-file", nil, []string{"GFD_CONFIG_FILE", "CONFIG_FILE"}, nil},
	{boolFlag, "use-node-feature-api", nil, []string{"GFD_USE_NODE_FEATURE_API", "USE_NODE_FEATURE_API"}, true},
	{stringFlag, "device-discovery-strategy", nil, []string{"DEVICE_DISCOVERY_STRATEGY"}, "auto"},
	{stringFlag, "driver-root-ctr-path", []string{"container-driver-root"}, []string{"DRIVER_ROOT_CTR_PATH", "CONTAINER_DRIVER_ROOT"}, spec.DefaultContainerDriverRoot},
}

// cliFlags builds urfave/cli flags from a table, as the main package declares them.
func cliFlags(table []peerFlag) []cli.Flag {
	flags := make([]cli.Flag, 0, len(table))
	for _, f := range table {
		switch f.Kind {
		case stringFlag:
			value, _ := f.Value.(string)
			flags = append(flags, &cli.StringFlag{Name: f.Name, Aliases: f.Aliases, EnvVars: f.EnvVars, Value: value})
		case boolFlag:
			value, _ := f.Value.(bool)
			flags = append(flags, &cli.BoolFlag{Name: f.Name, Aliases: f.Aliases, EnvVars: f.EnvVars, Value: value})
		case stringSliceFlag:
			flag := &cli.StringSliceFlag{Name: f.Name, Aliases: f.Aliases, EnvVars: f.EnvVars}
			if value, ok := f.Value.([]string); ok {
				flag.Value = cli.NewStringSlice(value...)
			}
			flags = append(flags, flag)
		case intSliceFlag:
			flags = append(flags, &cli.IntSliceFlag{Name: f.Name, Aliases: f.Aliases, EnvVars: f.EnvVars})
		case durationFlag:
			value, _ := f.Value.(time.Duration)
			flags = append(flags, &cli.GenericFlag{Name: f.Name, Aliases: f.Aliases, EnvVars: f.EnvVars, Value: spec.NewDurationValue(value)})
		default:
			panic("unknown flag kind " + string(f.Kind))
		}
	}
	return flags
}

// declaredFlags reads the flag declarations (&cli.XFlag{...} literals) of a main.go.
func declaredFlags(path string) ([]peerFlag, error) {
	fset := token.NewFileSet()
	file, err := parser.ParseFile(fset, path, nil, 0)
	if err != nil {
		return nil, err
	}
	var found []peerFlag
	var problems []string
	ast.Inspect(file, func(node ast.Node) bool {
		lit, ok := node.(*ast.CompositeLit)
		if !ok {
			return true
		}
		sel, ok := lit.Type.(*ast.SelectorExpr)
		if !ok || !isIdent(sel.X, "cli") || !strings.HasSuffix(sel.Sel.Name, "Flag") {
			return true
		}
		f := peerFlag{Kind: flagKind(sel.Sel.Name)}
		for _, elt := range lit.Elts {
			kv, ok := elt.(*ast.KeyValueExpr)
			ident, named := (*ast.Ident)(nil), false
			if ok {
				ident, named = kv.Key.(*ast.Ident)
			}
			if !named {
				problems = append(problems, fmt.Sprintf("%s: a flag literal without field names", fset.Position(elt.Pos())))
				continue
			}
			key := ident.Name
			var err error
			switch key {
			case "Name":
				f.Name, err = stringLiteral(kv.Value)
			case "Aliases":
				f.Aliases, err = stringList(kv.Value)
			case "EnvVars":
				f.EnvVars, err = stringList(kv.Value)
			case "Value":
				f.Value, err = defaultValue(kv.Value)
			}
			if err != nil {
				problems = append(problems, fmt.Sprintf("%s: %s of %s: %v", fset.Position(kv.Pos()), key, f.Name, err))
			}
		}
		found = append(found, f)
		return true
	})
	if problems != nil {
		return nil, errors.New(strings.Join(problems, "; "))
	}
	return found, nil
}

func isIdent(expr ast.Expr, name string) bool {
	id, ok := expr.(*ast.Ident)
	return ok && id.Name == name
}

func stringLiteral(expr ast.Expr) (string, error) {
	lit, ok := expr.(*ast.BasicLit)
	if !ok || lit.Kind != token.STRING {
		return "", fmt.Errorf("not a string literal")
	}
	return strconv.Unquote(lit.Value)
}

func stringList(expr ast.Expr) ([]string, error) {
	lit, ok := expr.(*ast.CompositeLit)
	if !ok {
		return nil, fmt.Errorf("not a []string literal")
	}
	var result []string
	for _, elt := range lit.Elts {
		s, err := stringLiteral(elt)
		if err != nil {
			return nil, err
		}
		result = append(result, s)
	}
	return result, nil
}

// specConstants are the api/config/v1 names the main packages use as defaults.
var specConstants = map[string]string{
	"MigStrategyNone":            spec.MigStrategyNone,
	"DeviceListStrategyEnvVar":   spec.DeviceListStrategyEnvVar,
	"DeviceIDStrategyUUID":       spec.DeviceIDStrategyUUID,
	"DefaultCDIAnnotationPrefix": spec.DefaultCDIAnnotationPrefix,
	"DefaultNvidiaCTKPath":       spec.DefaultNvidiaCTKPath,
	"DefaultContainerDriverRoot": spec.DefaultContainerDriverRoot,
}

// defaultValue evaluates the forms of default the main packages use; any other form is an
// error, so a new kind of default is noticed rather than compared wrongly.
func defaultValue(expr ast.Expr) (any, error) {
	switch e := expr.(type) {
	case *ast.BasicLit:
		if e.Kind == token.STRING {
			return strconv.Unquote(e.Value)
		}
	case *ast.Ident:
		if e.Name == "true" || e.Name == "false" {
			return e.Name == "true", nil
		}
	case *ast.SelectorExpr:
		if isIdent(e.X, "spec") {
			if value, ok := specConstants[e.Sel.Name]; ok {
				return value, nil
			}
		}
		if isIdent(e.X, "pluginapi") && e.Sel.Name == "KubeletSocket" {
			return pluginapi.KubeletSocket, nil
		}
	case *ast.CallExpr:
		fun, ok := e.Fun.(*ast.SelectorExpr)
		if ok && isIdent(fun.X, "cli") && fun.Sel.Name == "NewStringSlice" {
			var values []string
			for _, arg := range e.Args {
				if conv, ok := arg.(*ast.CallExpr); ok && isIdent(conv.Fun, "string") && len(conv.Args) == 1 {
					arg = conv.Args[0]
				}
				value, err := defaultValue(arg)
				if err != nil {
					return nil, err
				}
				text, ok := value.(string)
				if !ok {
					return nil, fmt.Errorf("NewStringSlice of a non-string")
				}
				values = append(values, text)
			}
			return values, nil
		}
		if ok && isIdent(fun.X, "spec") && fun.Sel.Name == "NewDurationValue" && len(e.Args) == 1 {
			if bin, ok := e.Args[0].(*ast.BinaryExpr); ok && bin.Op == token.MUL {
				number, isLit := bin.X.(*ast.BasicLit)
				unit, isSel := bin.Y.(*ast.SelectorExpr)
				if isLit && isSel && isIdent(unit.X, "time") && unit.Sel.Name == "Second" {
					if count, err := strconv.Atoi(number.Value); err == nil {
						return time.Duration(count) * time.Second, nil
					}
				}
			}
		}
	}
	return nil, fmt.Errorf("a default this check cannot evaluate")
}

// flagDifferences compares a restated table with the declarations of NVIDIA's source.
func flagDifferences(table []peerFlag, declared []peerFlag) []string {
	byName := map[string]peerFlag{}
	for _, f := range declared {
		byName[f.Name] = f
	}
	differences := []string{}
	for _, ours := range table {
		theirs, ok := byName[ours.Name]
		if !ok {
			differences = append(differences, fmt.Sprintf("%s: not declared by the source", ours.Name))
			continue
		}
		delete(byName, ours.Name)
		if !reflect.DeepEqual(normalized(ours), normalized(theirs)) {
			differences = append(differences, fmt.Sprintf("%s: restated as %+v, declared as %+v", ours.Name, ours, theirs))
		}
	}
	for name := range byName {
		differences = append(differences, fmt.Sprintf("%s: declared by the source, not restated", name))
	}
	sort.Strings(differences)
	return differences
}

func normalized(f peerFlag) peerFlag {
	if len(f.Aliases) == 0 {
		f.Aliases = nil
	}
	if len(f.EnvVars) == 0 {
		f.EnvVars = nil
	}
	return f
}

func init() {
	register("device-plugin-flags", "--source MAIN.go [--gfd]", func(args []string) (any, error) {
		flags := flag.NewFlagSet("device-plugin-flags", flag.ContinueOnError)
		flags.SetOutput(io.Discard)
		source := flags.String("source", "", "NVIDIA's cmd/nvidia-device-plugin/main.go (or gpu-feature-discovery's)")
		gfd := flags.Bool("gfd", false, "compare GFD's table")
		if err := flags.Parse(args); err != nil || flags.NArg() != 0 || *source == "" {
			return nil, usagef("--source MAIN.go is required")
		}
		declared, err := declaredFlags(*source)
		if err != nil {
			return nil, err
		}
		table := devicePluginFlags
		if *gfd {
			table = gfdFlags
		}
		return map[string]any{"flags": table, "differences": flagDifferences(table, declared)}, nil
	})
}
