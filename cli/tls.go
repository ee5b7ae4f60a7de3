package cli

import (
	"os"

	"github.com/arbor-coord/arbor/client"
	"github.com/spf13/cobra"
)

// tlsFlags are the global flags that make every connection TLS: each
// falls back to its ARBOR_TLS_* variable.
type tlsFlags struct {
	cert, key, ca string
}

// add adds the flags to root's persistent flags.
func (f *tlsFlags) add(root *cobra.Command) {
	flags := root.PersistentFlags()
	flags.StringVar(&f.cert, "tls-cert", "", "client certificate (PEM) for servers that require one (default $ARBOR_TLS_CERT)")
	flags.StringVar(&f.key, "tls-key", "", "the client certificate's key (PEM) (default $ARBOR_TLS_KEY)")
	flags.StringVar(&f.ca, "tls-ca", "", "CA certificates (PEM) that verify the servers; turns TLS on (default $ARBOR_TLS_CA)")
}

// resolved is f with each flag not given taken from its variable.
func (f tlsFlags) resolved() tlsFlags {
	for _, v := range []struct {
		val *string
		env string
	}{{&f.cert, "ARBOR_TLS_CERT"}, {&f.key, "ARBOR_TLS_KEY"}, {&f.ca, "ARBOR_TLS_CA"}} {
		if *v.val == "" {
			*v.val = os.Getenv(v.env)
		}
	}
	return f
}

// tlsOptions are the TLS options of every session a command opens: TLS
// when any TLS flag (or variable) is set, else none.
func (e *env) tlsOptions() ([]client.Option, error) {
	f := e.tls.resolved()
	if f == (tlsFlags{}) {
		return nil, nil
	}
	if (f.cert == "") != (f.key == "") {
		return nil, usagef("--tls-cert and --tls-key go together")
	}
	conf, err := client.TLSConfigFromFiles(f.cert, f.key, f.ca)
	if err != nil {
		return nil, err
	}
	return []client.Option{client.WithTLS(conf)}, nil
}
