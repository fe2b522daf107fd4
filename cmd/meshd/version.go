package main

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"
)

func newVersionCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the build information",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			w := cmd.OutOrStdout()
			info, ok := debug.ReadBuildInfo()
			if !ok {
				fmt.Fprintf(w, "meshd %s\n", buildVersion())
				return nil
			}
			fmt.Fprintf(w, "meshd %s\n", buildVersion())
			fmt.Fprintf(w, "  module:   %s\n", info.Main.Path)
			if rev, modified := vcsRevision(info); rev != "" {
				if modified {
					rev += " (modified)"
				}
				fmt.Fprintf(w, "  commit:   %s\n", rev)
			}
			if t := buildSetting(info, "vcs.time"); t != "" {
				fmt.Fprintf(w, "  built:    %s\n", t)
			}
			fmt.Fprintf(w, "  go:       %s\n", info.GoVersion)
			fmt.Fprintf(w, "  platform: %s/%s\n", runtime.GOOS, runtime.GOARCH)
			return nil
		},
	}
}

// buildVersion is the module version meshd was built as: a release tag when
// installed with "go install ...@version", "(devel)" for a local build.
func buildVersion() string {
	info, ok := debug.ReadBuildInfo()
	if !ok || info.Main.Version == "" {
		return "(devel)"
	}
	return info.Main.Version
}

func vcsRevision(info *debug.BuildInfo) (revision string, modified bool) {
	return buildSetting(info, "vcs.revision"), buildSetting(info, "vcs.modified") == "true"
}

func buildSetting(info *debug.BuildInfo, key string) string {
	for _, s := range info.Settings {
		if s.Key == key {
			return s.Value
		}
	}
	return ""
}
