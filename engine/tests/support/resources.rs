//! `-- resource: <name> <version> <file> …` lines of a validation script: the resource bundles
//! the script needs, which no statement of the planner can create (`%20` is a space in a file
//! name).

/// One declared version of a resource.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeclaredVersion {
    pub number: u64,
    pub files: Vec<String>,
}

/// Resources in order of first declaration, each with its versions in ascending order.
pub fn declared_resources(src: &str) -> Vec<(String, Vec<DeclaredVersion>)> {
    let mut resources: Vec<(String, Vec<DeclaredVersion>)> = Vec::new();
    for line in src.lines() {
        let Some(rest) = line.trim().strip_prefix("-- resource: ") else {
            continue;
        };
        let mut words = rest.split_whitespace();
        let name = words
            .next()
            .expect("a resource line names the resource")
            .to_string();
        let number: u64 = words
            .next()
            .and_then(|n| n.parse().ok())
            .filter(|n| *n >= 1)
            .expect("a resource line gives a version number of at least 1");
        let files = words.map(|f| f.replace("%20", " ")).collect();
        let version = DeclaredVersion { number, files };
        match resources.iter_mut().find(|(n, _)| *n == name) {
            Some((_, versions)) => versions.push(version),
            None => resources.push((name, vec![version])),
        }
    }
    for (_, versions) in &mut resources {
        versions.sort_by_key(|v| v.number);
    }
    resources
}
