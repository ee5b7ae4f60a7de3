package cli

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/arbor-coord/arbor/client"
	"github.com/arbor-coord/arbor/recipes"
)

// serviceJSON is one service that services list prints.
type serviceJSON struct {
	Name      string `json:"name"`
	Instances int    `json:"instances"` // the nodes under the service's node
}

type servicesJSON struct {
	Services []serviceJSON `json:"services"`
}

// instanceJSON is a recipes.Instance, with metadata always an object.
type instanceJSON struct {
	ID       string            `json:"id"`
	Address  string            `json:"address"`
	Port     int               `json:"port"`
	Metadata map[string]string `json:"metadata"`
}

// instancesJSON is what services list SERVICE prints, and services watch
// after each change.
type instancesJSON struct {
	Service   string         `json:"service"`
	Instances []instanceJSON `json:"instances"`
}

// registrationJSON is what services register prints.
type registrationJSON struct {
	Path  string `json:"path"`
	Event string `json:"event"` // "registered" or "deregistered"
}

// errUnregistered is the error of a registration that ended with the
// session.
var errUnregistered = errors.New("the session ended: the instance is no longer registered")

func (e *env) servicesCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "services",
		Short: "List, follow and register the instances of services",
		Long: "Service discovery as package recipes does it: each instance of a service is an\n" +
			"ephemeral node, " + recipes.ServicesRoot + "/SERVICE/ID, holding the instance as JSON (id,\n" +
			"address, port, metadata). It lives as long as the session that registered it.",
		Example: "  arbor services list\n" +
			"  arbor services list web\n" +
			"  arbor services watch web\n" +
			"  arbor services register web web-1 10.0.0.7 8080 --meta zone=eu",
		Args: usageArgs(cobra.NoArgs), // an unknown subcommand
		RunE: func(cmd *cobra.Command, args []string) error { return cmd.Help() },
	}
	cmd.AddCommand(e.servicesListCommand(), e.servicesWatchCommand(), e.servicesRegisterCommand())
	return cmd
}

func (e *env) servicesListCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "list [SERVICE]",
		Short: "List the services, or the instances of one",
		Long: "Without SERVICE, list the services under " + recipes.ServicesRoot + " and how many instances each\n" +
			"has. With SERVICE, list its instances, sorted by ID: ID, address, port and\n" +
			"metadata (\"-\" for none). Nodes that do not hold an instance's JSON are left out.\n" +
			"A service nobody registered has no instances; that is not an error.",
		Example:           "  arbor services list\n  arbor services list web\n  arbor services list -o json web",
		Args:              usageArgs(cobra.RangeArgs(0, 1)),
		ValidArgsFunction: e.completeServiceArg,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return e.runLong(cmd, e.listServices)
			}
			service := args[0]
			if err := checkName("service", service); err != nil {
				return err
			}
			return e.run(cmd, func(ctx context.Context, c *client.Client) error {
				return e.followInstances(ctx, c, service, func(list []recipes.Instance) (bool, error) {
					return false, e.printInstances(service, list)
				})
			})
		},
	}
}

// listServices prints the services and their instance counts.
func (e *env) listServices(ctx context.Context, c *client.Client) error {
	rctx, cancel := e.req(ctx)
	names, _, err := c.Children(rctx, recipes.ServicesRoot)
	cancel()
	if err != nil && !errors.Is(err, client.ErrNoNode) { // no node: no services
		return describe(err, recipes.ServicesRoot)
	}
	out := servicesJSON{Services: []serviceJSON{}}
	for _, name := range names {
		rctx, cancel := e.req(ctx)
		ok, st, err := c.Exists(rctx, joinPath(recipes.ServicesRoot, name))
		cancel()
		switch {
		case err != nil:
			return describe(err, joinPath(recipes.ServicesRoot, name))
		case ok:
			out.Services = append(out.Services, serviceJSON{Name: name, Instances: int(st.NumChildren)})
		}
	}
	if e.json() {
		return e.printJSON(out)
	}
	tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SERVICE\tINSTANCES")
	for _, s := range out.Services {
		fmt.Fprintf(tw, "%s\t%d\n", s.Name, s.Instances)
	}
	return tw.Flush()
}

func (e *env) servicesWatchCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "watch SERVICE",
		Short: "Print the instances of a service after each change",
		Long: "Print the instances of SERVICE, as services list SERVICE does, then again after\n" +
			"each change, until interrupted (Ctrl-C or SIGTERM: exit status 0). In text the\n" +
			"lists are separated by an empty line; with -o json each is one line. It follows\n" +
			"the service with a recipes.ServiceCache: a burst of changes may print only the\n" +
			"list after the last of them. If the session ends, the exit status is 1.",
		Example:           "  arbor services watch web\n  arbor services watch -o json web | jq -c '[.instances[].address]'",
		Args:              usageArgs(cobra.ExactArgs(1)),
		ValidArgsFunction: e.completeServiceArg,
		RunE: func(cmd *cobra.Command, args []string) error {
			service := args[0]
			if err := checkName("service", service); err != nil {
				return err
			}
			return e.runLong(cmd, func(ctx context.Context, c *client.Client) error {
				first := true
				err := e.followInstances(ctx, c, service, func(list []recipes.Instance) (bool, error) {
					if !first && !e.json() {
						if _, err := fmt.Fprintln(e.stdout); err != nil {
							return false, err
						}
					}
					first = false
					return true, e.printInstances(service, list)
				})
				return ctxOr(ctx, err)
			})
		},
	}
}

// followInstances passes the instances of service to each after the first
// load and after each change, until each returns false or an error, or
// ctx ends (ctx's error), or the session does.
func (e *env) followInstances(ctx context.Context, c *client.Client, service string,
	each func([]recipes.Instance) (bool, error)) error {
	sc, err := recipes.NewServiceCache(c, service)
	if err != nil {
		return err
	}
	defer sc.Close()
	for {
		select {
		case list, ok := <-sc.Watch():
			if !ok {
				if err := c.Err(); err != nil {
					return err
				}
				return errors.New("the session ended")
			}
			if more, err := each(list); err != nil || !more {
				return err
			}
		case <-ctx.Done():
			return fmt.Errorf("reading the instances of %s: %w", service, ctx.Err())
		}
	}
}

// printInstances prints a list of instances: a table, or one JSON value.
func (e *env) printInstances(service string, list []recipes.Instance) error {
	if e.json() {
		out := instancesJSON{Service: service, Instances: make([]instanceJSON, len(list))}
		for i, in := range list {
			md := in.Metadata
			if md == nil {
				md = map[string]string{}
			}
			out.Instances[i] = instanceJSON{ID: in.ID, Address: in.Address, Port: in.Port, Metadata: md}
		}
		return e.printJSON(out)
	}
	tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tADDRESS\tPORT\tMETADATA")
	for _, in := range list {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\n", in.ID, in.Address, in.Port, metadataText(in.Metadata))
	}
	return tw.Flush()
}

// metadataText is "k=v,k2=v2" sorted by key, or "-" for none.
func metadataText(md map[string]string) string {
	if len(md) == 0 {
		return "-"
	}
	var b strings.Builder
	for i, k := range slices.Sorted(maps.Keys(md)) {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%s=%s", k, md[k])
	}
	return b.String()
}

func (e *env) servicesRegisterCommand() *cobra.Command {
	var meta []string
	cmd := &cobra.Command{
		Use:   "register SERVICE ID ADDRESS PORT [--meta KEY=VALUE]...",
		Short: "Register an instance of a service until interrupted",
		Long: "Register an instance of SERVICE (recipes.Register): an ephemeral node\n" +
			recipes.ServicesRoot + "/SERVICE/ID holding the instance as JSON. Print when registered, and\n" +
			"hold the registration until interrupted (Ctrl-C or SIGTERM: deregister, exit\n" +
			"status 0). If another live session holds ID (an earlier run whose session has\n" +
			"not expired yet), wait for it to go. If the session ends while registered, the\n" +
			"exit status is 1.",
		Example: "  arbor services register web web-1 10.0.0.7 8080\n" +
			"  arbor services register web web-2 10.0.0.8 8080 --meta zone=eu --meta version=2",
		Args:              usageArgs(cobra.ExactArgs(4)),
		ValidArgsFunction: e.completeServiceArg,
		RunE: func(cmd *cobra.Command, args []string) error {
			inst, err := instanceOf(args[1:], meta)
			if err != nil {
				return err
			}
			service := args[0]
			if err := checkName("service", service); err != nil {
				return err
			}
			path := recipes.ServicesRoot + "/" + service + "/" + inst.ID
			return e.runLong(cmd, func(ctx context.Context, c *client.Client) error {
				_, ended := c.Session()
				reg, err := recipes.Register(ctx, c, service, inst)
				if err != nil {
					if ctx.Err() != nil {
						return fmt.Errorf("interrupted while waiting for another session's %s to go", path)
					}
					return describe(err, path)
				}
				deregister := func() error {
					rctx, cancel := e.req(context.WithoutCancel(ctx))
					defer cancel()
					return reg.Close(rctx)
				}
				if err := e.printRegistration(path, "registered"); err != nil {
					deregister()
					return err
				}
				select {
				case <-ended:
					deregister()
					return errUnregistered
				case <-ctx.Done():
				}
				if err := deregister(); err != nil {
					return err
				}
				return e.printRegistration(path, "deregistered")
			})
		},
	}
	cmd.Flags().StringArrayVarP(&meta, "meta", "m", nil, "metadata KEY=VALUE (repeat for more)")
	return cmd
}

// instanceOf makes the instance of register's ID ADDRESS PORT and --meta.
func instanceOf(args, meta []string) (recipes.Instance, error) {
	inst := recipes.Instance{ID: args[0], Address: args[1]}
	if err := checkName("instance ID", inst.ID); err != nil {
		return inst, err
	}
	port, err := strconv.Atoi(args[2])
	if err != nil || port < 0 || port > 65535 {
		return inst, usagef("port %q is not a number from 0 to 65535", args[2])
	}
	inst.Port = port
	for _, kv := range meta {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return inst, usagef("metadata %q is not KEY=VALUE", kv)
		}
		if inst.Metadata == nil {
			inst.Metadata = map[string]string{}
		}
		inst.Metadata[k] = v
	}
	return inst, nil
}

// checkName checks a service name or an instance ID: one znode name.
func checkName(what, name string) error {
	if name == "" || name == "." || name == ".." || strings.Contains(name, "/") {
		return usagef("%s %q: want a name without /", what, name)
	}
	return nil
}

func (e *env) printRegistration(path, event string) error {
	if e.json() {
		return e.printJSON(registrationJSON{Path: path, Event: event})
	}
	_, err := fmt.Fprintf(e.stdout, "%s %s\n", event, path)
	return err
}
