module github.com/ds4-go/ds4

go 1.26.0

require (
	github.com/spf13/pflag v1.1.0
	github.com/stretchr/testify v1.12.1
	golang.org/x/sys v0.50.0
	golang.org/x/term v0.48.0
)

require go.yaml.in/yaml/v3 v3.0.5 // indirect
