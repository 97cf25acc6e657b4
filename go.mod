module github.com/dexzd/dexzd

go 1.26.8
